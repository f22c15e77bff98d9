// The console's browser test, a module of its own so that the module
// github.com/redstream-go/redstream does not require chromedp. It is never published: the
// replace builds it against this checkout.
module github.com/redstream-go/redstream/console/browsertest

go 1.25.0

replace github.com/redstream-go/redstream => ../..

require (
	github.com/chromedp/cdproto v0.160.1
	github.com/chromedp/chromedp v0.23.1
	github.com/redis/rueidis v1.0.79
	github.com/redstream-go/redstream v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require (
	github.com/VictoriaMetrics/metrics v1.45.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/netresearch/go-cron v0.9.1 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
