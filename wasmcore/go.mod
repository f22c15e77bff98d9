module github.com/redstream-go/redstream/wasmcore

go 1.25.0

replace github.com/redstream-go/redstream => ../

require (
	github.com/redstream-go/redstream v0.0.0-00010101000000-000000000000
	github.com/tetratelabs/wazero v1.12.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/VictoriaMetrics/metrics v1.45.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
