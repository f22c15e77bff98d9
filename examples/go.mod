// examples/ holds no Go code. This file makes it a module of its own, so that the Go module
// github.com/redstream-go/redstream does not carry it in every download.
module github.com/redstream-go/redstream/examples

go 1.25
