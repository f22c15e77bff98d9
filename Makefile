# Fixed targets: test (the README's test command), check (static checks and generated
# files), ci (everything CI runs, on every server: .ci/run), servers (build or reuse the
# cached Redis 8.x and Valkey servers CI tests against), bench, nested (the nested modules
# but wasmcore: .ci/nested-modules), work (a go.work for working in the published nested
# modules; not committed, see RELEASING.md).
.PHONY: test check ci servers bench generate demo nested work

# The nested modules published with the root; they require the root at a release, and
# build against the checkout in a workspace (.ci/workspace, or make work).
PUBLISHED := wasmcore stream/otelstream metrics/promcollector

test:
	go test -race -timeout 40m ./...
	.ci/workspace wasmcore go test -race -timeout 20m ./...

check:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	go vet ./...
	cd benchmarks && go vet ./...
	.ci/workspace wasmcore go vet ./...
	GOOS=wasip1 GOARCH=wasm go build ./core/...
	go generate ./... && .ci/workspace wasmcore go generate ./... && git diff --exit-code

ci:
	.ci/run

servers:
	.ci/servers

generate:
	go generate ./...
	.ci/workspace wasmcore go generate ./...

nested:
	.ci/nested-modules

# A go.work at the root using the root and the published nested modules, each release they
# require replaced by the checkout: go commands in wasmcore/, stream/otelstream/ and
# metrics/promcollector/ then build against the checkout (and so do the root's, with the
# nested modules' versions; CI runs them without it).
work:
	rm -f go.work go.work.sum
	go work init . $(PUBLISHED)
	go work edit -go=$$(sed -n 's/^go //p' go.mod)
	for m in $(PUBLISHED); do \
	  v=$$(awk '$$1 == "github.com/redstream-go/redstream" && $$2 ~ /^v/ { print $$2 }' $$m/go.mod); \
	  go work edit -replace=github.com/redstream-go/redstream@$$v=.; \
	done

bench:
	cd benchmarks && go test -run '^$$' -bench . -benchmem -count 5 -timeout 60m .

demo:
	go run ./tools/redstream demo
