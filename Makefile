# Fixed targets: test (the README's test command), check (static checks and generated
# files), ci (everything CI runs, on every server: .ci/run), servers (build or reuse the
# cached Redis 8.x and Valkey servers CI tests against), bench.
.PHONY: test check ci servers bench generate demo

test:
	go test -race -timeout 40m ./...
	cd wasmcore && go test -race -timeout 20m ./...

check:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	go vet ./...
	cd benchmarks && go vet ./...
	cd wasmcore && go vet ./...
	GOOS=wasip1 GOARCH=wasm go build ./core/...
	go generate ./... && (cd wasmcore && go generate ./...) && git diff --exit-code

ci:
	.ci/run

servers:
	.ci/servers

generate:
	go generate ./...
	cd wasmcore && go generate ./...

bench:
	cd benchmarks && go test -run '^$$' -bench . -benchmem -count 5 -timeout 60m .

demo:
	go run ./tools/redstream demo
