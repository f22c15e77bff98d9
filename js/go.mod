// The Node.js package holds no Go code. This file makes js/ a module of its own, so that the
// Go module github.com/redstream-go/redstream does not carry the package's sources, generated
// scripts and test vectors in every download.
module github.com/redstream-go/redstream/js

go 1.25
