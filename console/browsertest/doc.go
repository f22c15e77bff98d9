// Package browsertest holds the console's browser test: it drives package console in
// headless Chromium (Debian's chromium package, through chromedp) over a real redis-server,
// through the console's public API only.
//
// It is a Go module of its own, never published, so that the module
// github.com/redstream-go/redstream does not require chromedp. Run it from this directory:
//
//	go test ./...
//
// It skips without Chromium and fails instead under REDSTREAM_REQUIRE_CHROMIUM=1;
// REDSTREAM_UPDATE_SCREENSHOTS=1 rewrites the screenshots in docs/console.
package browsertest
