package lua

//go:generate go run ../tools/luagen -dir .
