package lua

//go:generate go run ../tools/luagen -src src -out .
