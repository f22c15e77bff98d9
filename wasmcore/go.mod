module github.com/redstream-go/redstream/wasmcore

go 1.25.0

require (
	github.com/redstream-go/redstream v0.1.0
	github.com/tetratelabs/wazero v1.12.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require golang.org/x/sys v0.47.0 // indirect
