# Fixed targets: test (what CI runs), check (static checks and generated files), bench.
.PHONY: test check bench generate demo

test:
	go test -race -timeout 40m ./...

check:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	go vet ./...
	cd benchmarks && go vet ./...
	GOOS=wasip1 GOARCH=wasm go build ./core/...
	go generate ./... && git diff --exit-code

generate:
	go generate ./...

bench:
	cd benchmarks && go test -run '^$$' -bench . -benchmem -count 5 -timeout 60m .

demo:
	go run ./tools/redstream demo
