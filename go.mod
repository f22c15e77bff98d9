module github.com/redstream-go/redstream

go 1.25.0

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/netresearch/go-cron v0.9.1
	github.com/redis/rueidis v1.0.79
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
	pgregory.net/rapid v1.3.0
)

require (
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
