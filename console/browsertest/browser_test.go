package browsertest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/periodic"
)

// chromium returns the headless browser's binary: REDSTREAM_CHROMIUM, else Debian's
// /usr/bin/chromium (package chromium). When it is missing the test fails under
// REDSTREAM_REQUIRE_CHROMIUM=1 and skips loudly otherwise.
func chromium(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("REDSTREAM_CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	msg := fmt.Sprintf("\n*** NO CHROMIUM at %s: the browser test did not run ***\n"+
		"*** apt-get install chromium, or set REDSTREAM_CHROMIUM; REDSTREAM_REQUIRE_CHROMIUM=1 fails instead ***", bin)
	if os.Getenv("REDSTREAM_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// screenshotDir is docs/console when REDSTREAM_UPDATE_SCREENSHOTS=1 (the README's pictures),
// else a temporary directory (the screenshots are still taken and checked).
func screenshotDir(t *testing.T) string {
	if os.Getenv("REDSTREAM_UPDATE_SCREENSHOTS") == "1" {
		dir := filepath.Join("..", "..", "docs", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

type browserOrder struct {
	ID       int    `json:"orderId"`
	Customer string `json:"customer"`
}

// TestBrowser drives the console in headless Chromium over a real redis-server: a running
// consumer's handler fails three orders, which become dead letters; in the browser the
// operator sees the topic and its dead letters, inspects one, replays it (and the handler,
// repaired, handles it), deletes another; GETs of the action URLs change nothing, and a
// form posted without its CSRF token is refused.
func TestBrowser(t *testing.T) {
	bin := chromium(t)
	// A server of its own, so that the screenshots show only this test's topic.
	client := redistest.NewClient(t, redistest.NewServer(t).Addr)
	topic := "orders"
	dlq := streamwire.DeadLetterStreamName(topic)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The application: a consumer whose billing handler fails orders 2, 3 and 4 until repaired.
	var broken atomic.Bool
	broken.Store(true)
	var mu sync.Mutex
	handled := map[int]int{} // order id -> times handled
	cfg := stream.Config{
		BlockTimeout:  100 * time.Millisecond,
		MaxDeliveries: 2,
		Autoclaim:     stream.AutoclaimConfig{MinIdle: 100 * time.Millisecond, Interval: 50 * time.Millisecond},
	}
	consumer, err := stream.NewConsumer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Register(consumer, stream.Handler[browserOrder]{
		Topic: topic, Group: "billing",
		Handle: func(ctx context.Context, m *stream.Message[browserOrder]) error {
			if broken.Load() && m.Body.ID >= 2 && m.Body.ID <= 4 {
				return fmt.Errorf("payment service down for order %d", m.Body.ID)
			}
			mu.Lock()
			handled[m.Body.ID]++
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, client.B().XgroupCreateconsumer().Key(topic).Group("billing").Consumer("crashed-worker-7").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	crashedAt := time.Now()
	defer consumer.Close(context.Background())
	producer, err := stream.NewProducer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		m := stream.Message[browserOrder]{Key: "order-" + strconv.Itoa(i), Body: browserOrder{ID: i, Customer: "ada"}}
		if _, err := producer.Send(ctx, topic, m); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "3 dead letters", func() bool { return xlen(t, client, dlq) == 3 })
	broken.Store(false) // the payment service is back

	// The console is told a short ConsumerTimeout, so that the name a crashed process left
	// shows as one housekeeping removes (the consumer itself keeps the default, 10 minutes).
	shown := cfg
	shown.ConsumerTimeout = 2 * time.Second
	waitFor(t, 10*time.Second, "the crashed consumer to be idle 2s", func() bool { return time.Since(crashedAt) > 2100*time.Millisecond })
	// The application's rate limiters, on the same server: an API limit per customer (wrapped
	// for metrics, as config builds it) and a sign-in multi-limit; ada has used both.
	apiLimiter, err := redisbackend.NewLimiter(client, redstream.SlidingWindow(time.Hour, 100), redisbackend.Options{KeyPrefix: "shop:rl:api"})
	if err != nil {
		t.Fatal(err)
	}
	api, err := metrics.Named("api", apiLimiter)
	if err != nil {
		t.Fatal(err)
	}
	var loginLimiter *redisbackend.Limiter
	login, err := redstream.Multi(func(specs []redstream.Spec) (redstream.Limiter, error) {
		l, err := redisbackend.NewMultiLimiter(client, specs, redisbackend.Options{KeyPrefix: "shop:rl:login"})
		loginLimiter = l
		return l, err
	}, redstream.Rule{Name: "burst", Spec: redstream.TokenBucket(5, 1.0/3600)}, // a token an hour: none comes back during the test
		redstream.Rule{Name: "hourly", Spec: redstream.SlidingWindow(time.Hour, 20)}) // not a fixed window: the test may cross the top of an hour
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 7; i++ {
		if _, err := api.AllowN(ctx, "customer:ada", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ { // the sixth sign-in is denied: the burst is used up
		if _, err := login.AllowN(ctx, "ada@example.com", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ := serve(t, console.Options{Client: client, Stream: shown, Topics: []string{topic}, Consumers: []*stream.Consumer{consumer},
		Limiters: map[string]redstream.Limiter{"api": api, "login": login}})
	base := srv.URL
	shots := screenshotDir(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 720),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	do("start the browser")
	// Accept the confirmation dialogs of destructive buttons, as an operator clicking OK.
	var dialogs atomic.Int64
	dialogEvents := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogEvents {
			if err != nil {
				return
			}
			dialogs.Add(1)
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	shot := func(name string) {
		t.Helper()
		buf, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("browser: screenshot %s: %v", name, err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(buf))
		if err != nil || cfg.Width < 500 || cfg.Height < 200 {
			t.Fatalf("screenshot %s: %v, %dx%d", name, err, cfg.Width, cfg.Height)
		}
		if err := os.WriteFile(filepath.Join(shots, name), buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s: %dx%d, %d bytes", name, cfg.Width, cfg.Height, len(buf))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: text of %s: %v", sel, err)
		}
		return s
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	attr := func(sel, name string) string {
		t.Helper()
		a, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		if err != nil {
			t.Fatalf("browser: attribute %s of %s: %v", name, sel, err)
		}
		return a.Value
	}

	// The topics page shows the topic and its 3 dead letters.
	do("open the console", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#topics")))
	if got := text("#topics"); !strings.Contains(got, topic) || !regexp.MustCompile(`\b3\s*$`).MatchString(strings.TrimSpace(got)) {
		t.Fatalf("topics table does not show %s with 3 dead letters:\n%s", topic, got)
	}
	shot("topics.png")

	do("open the topic", chromedp.Click(css(`#topics a[href^="/topic"]`)), chromedp.WaitVisible(css("#groups")))
	if got := text("#groups"); !strings.Contains(got, "billing") {
		t.Fatalf("groups table lacks billing:\n%s", got)
	}
	shot("topic.png")
	do("open the group", chromedp.Click(css(`#groups a`)), chromedp.WaitVisible(css("#consumers")))
	if got := text("#consumers"); !strings.Contains(got, "crashed-worker-7") || !strings.Contains(got, "will be removed") {
		t.Fatalf("the crashed consumer is not marked for removal:\n%s", got)
	}
	if got := text("#local"); !strings.Contains(got, "reading") {
		t.Fatalf("this process's handler state: %q", got)
	}
	shot("group.png")

	// The dead letters.
	openDLQ := func() {
		t.Helper()
		do("open the dead letters", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#topics")),
			chromedp.Click(css(`#topics a.dl`)), chromedp.WaitVisible(css("#deadletters")))
	}
	openDLQ()
	if got := text("#total"); !strings.HasPrefix(got, "3 dead letters") {
		t.Fatalf("dead-letter total: %q", got)
	}
	if got := text("#deadletters"); strings.Count(got, "payment service down for order") != 3 {
		t.Fatalf("dead letters table does not show the 3 handler errors:\n%s", got)
	}
	shot("deadletters.png")

	// Search them by body: every body names its order; none holds "no-such-text".
	do("search the bodies", chromedp.SendKeys(css(`input[name="body"]`), `"orderId"`), chromedp.Click(css("#search")),
		chromedp.WaitVisible(css("#scanned")))
	if got := text("#deadletters"); strings.Count(got, "payment service down for order") != 3 {
		t.Fatalf("a body search for the order field does not find the 3 dead letters:\n%s", got)
	}
	if got := text("#scanned"); !strings.Contains(got, "3 dead letters read for this page") {
		t.Fatalf("the search does not say what it read: %q", got)
	}
	do("search for what no body holds", chromedp.Clear(css(`input[name="body"]`)), chromedp.SendKeys(css(`input[name="body"]`), "no-such-text"),
		chromedp.Click(css("#search")), chromedp.WaitVisible(css("#no-rows")))
	if got := text("#deadletters"); !strings.Contains(got, "no dead letters match") {
		t.Fatalf("a search without matches:\n%s", got)
	}

	// A million dead letters, 12 of them holding a needle: the search finds exactly those,
	// page after page, each page bounded by its time budget (its time is logged).
	big := topic + "-big"
	planted := plantMillion(t, client, big, "needle-4c1")
	next := base + "/dlq?" + url.Values{"t": {big}, "body": {"needle-4c1"}}.Encode()
	found := map[string]bool{}
	for page := 1; next != ""; page++ {
		if page > 200 { // a page reads for its budget: fewer entries under the race detector
			t.Fatal("the search over a million dead letters does not end")
		}
		began := time.Now()
		do("search a million dead letters", chromedp.Navigate(next), chromedp.WaitVisible(css("#scanned")))
		t.Logf("search page %d: %v, %s", page, time.Since(began), text("#scanned"))
		ids, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#deadletters input.sel")).map(i => i.value)`))
		if err != nil {
			t.Fatalf("browser: the found ids: %v", err)
		}
		for _, id := range ids {
			found[id] = true
		}
		if next, err = chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("a.next") ? document.querySelector("a.next").href : ""`)); err != nil {
			t.Fatalf("browser: the next page's link: %v", err)
		}
	}
	if len(found) != len(planted) {
		t.Errorf("the search found %d of the %d planted dead letters", len(found), len(planted))
	}
	for id := range found {
		if !planted[id] {
			t.Errorf("%s found but not planted", id)
		}
	}
	if err := client.Do(ctx, client.B().Del().Key(streamwire.DeadLetterStreamName(big)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	openDLQ()

	// Inspect the first, then replay it.
	orderRE := regexp.MustCompile(`"orderId": (\d+)`)
	do("inspect a dead letter", chromedp.Click(css(`#deadletters tbody tr:first-child td.id a`)),
		chromedp.WaitVisible(css("#body")))
	m := orderRE.FindStringSubmatch(text("#body"))
	if m == nil {
		t.Fatalf("decoded body lacks the order id:\n%s", text("#body"))
	}
	replayed, _ := strconv.Atoi(m[1])
	if got := text("#meta"); !strings.Contains(got, "billing") || !strings.Contains(got, "payment service down") {
		t.Fatalf("dead letter's details lack its group or error:\n%s", got)
	}
	shot("deadletter.png")
	do("replay it", chromedp.Click(css("#replay")), chromedp.WaitVisible(css("#result")))
	if got := text("#result"); !strings.Contains(got, "replayed as entry") {
		t.Fatalf("replay result: %q", got)
	}
	shot("replayed.png")
	waitFor(t, 15*time.Second, fmt.Sprintf("the handler to handle replayed order %d", replayed), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled[replayed] == 1
	})
	// The result page is a GET (POST-redirect-GET): reloading it replays nothing again.
	do("reload the result", chromedp.Reload(), chromedp.WaitVisible(css("#result")))
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	again := handled[replayed]
	mu.Unlock()
	if again != 1 {
		t.Errorf("reloading the result page replayed again: order %d handled %d times", replayed, again)
	}

	// Delete another (confirming the dialog).
	openDLQ()
	do("inspect another", chromedp.Click(css(`#deadletters tbody tr:first-child td.id a`)),
		chromedp.WaitVisible(css("#body")))
	m = orderRE.FindStringSubmatch(text("#body"))
	if m == nil || m[1] == strconv.Itoa(replayed) {
		t.Fatalf("second dead letter: %v", m)
	}
	deleted, _ := strconv.Atoi(m[1])
	do("delete it", chromedp.Click(css("#delete")), chromedp.WaitVisible(css("#result")))
	if got := text("#result"); !strings.Contains(got, "1 of 1 selected dead letters deleted") {
		t.Fatalf("delete result: %q", got)
	}
	if dialogs.Load() < 1 {
		t.Error("delete asked for no confirmation")
	}
	if n := xlen(t, client, dlq); n != 1 {
		t.Fatalf("%d dead letters left, want 1", n)
	}
	mu.Lock()
	if handled[deleted] != 0 {
		t.Errorf("deleted order %d was handled", deleted)
	}
	mu.Unlock()

	// A GET never changes state, even of an action's URL with a valid id.
	openDLQ()
	remaining := attr(`input.sel`, "value")
	if remaining == "" {
		t.Fatal("browser: the remaining dead letter has no id")
	}
	topicLen := xlen(t, client, topic)
	for _, path := range []string{"/dlq/replay", "/dlq/delete", "/dlq/purge"} {
		do("GET "+path, chromedp.Navigate(base+path+q("t", topic, "id", remaining, "confirm", topic)),
			chromedp.WaitVisible(css("h1")))
	}
	if n := xlen(t, client, dlq); n != 1 {
		t.Fatalf("GETs changed the dead letters: %d, want 1", n)
	}
	if n := xlen(t, client, topic); n != topicLen {
		t.Fatalf("GETs changed the topic: %d entries, want %d", n, topicLen)
	}

	// A form posted without its CSRF token is refused, and so is a script's POST.
	openDLQ()
	do("submit without the token",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('input[name=csrf]').remove(); document.querySelector('input.sel').checked = true;`),
		chromedp.Click(css("#replay-selected")), chromedp.WaitVisible(css("#error")))
	if got := text("h1"); !strings.HasPrefix(got, "403") {
		t.Fatalf("POST without the token: %q", got)
	}
	if got := text("#error"); !strings.Contains(got, "CSRF") {
		t.Fatalf("refusal does not say why: %q", got)
	}
	// A page of another origin that posts the console's form (a CSRF attack) is refused.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><form method="post" action="%s"><input name="t" value="%s">`+
			`<input name="id" value="%s"><input name="csrf" value="guessed"></form><script>document.forms[0].submit()</script>`,
			html.EscapeString(base+"/dlq/delete"), html.EscapeString(topic), html.EscapeString(remaining))
	}))
	defer attacker.Close()
	do("a foreign page posts the form", chromedp.Navigate(attacker.URL), chromedp.WaitVisible(css("#error")))
	if got := text("h1"); !strings.HasPrefix(got, "403") {
		t.Fatalf("cross-origin POST: %q", got)
	}
	if n := xlen(t, client, dlq); n != 1 {
		t.Fatalf("refused POSTs changed the dead letters: %d, want 1", n)
	}

	// The history the running consumer recorded (at most a second after it happened): the
	// chart of the failures while the payment service was down, and the successes since.
	waitFor(t, 20*time.Second, "the consumer's history of failures and successes", func() bool {
		var failed, processed int64
		for m := time.Now().Unix()/60 - 2; m <= time.Now().Unix()/60; m++ {
			h, _ := client.Do(ctx, client.B().Hgetall().Key(streamwire.HistoryKey(topic, m)).Build()).AsStrMap()
			f, _ := strconv.ParseInt(h["failed|billing"], 10, 64)
			p, _ := strconv.ParseInt(h["processed|billing"], 10, 64)
			failed, processed = failed+f, processed+p
		}
		return failed > 0 && processed > 0
	})
	do("open the history", chromedp.Navigate(base+"/topic?t="+topic), chromedp.WaitVisible(css("#groups")),
		chromedp.Click(css("#history-link")), chromedp.WaitVisible(css("#history-chart")))
	totals, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](
		`Object.fromEntries(Array.from(document.querySelectorAll("#history-chart polyline")).map(p => [p.dataset.kind, p.dataset.total]))`))
	if err != nil {
		t.Fatalf("browser: the chart's series: %v", err)
	}
	if totals["failed"] == "" || totals["failed"] == "0" || totals["processed"] == "" || totals["processed"] == "0" {
		t.Fatalf("the chart does not draw the recorded failures and successes: %v", totals)
	}
	shot("history.png")

	// A message scheduled an hour ahead: listed from the overview, then cancelled (confirming
	// the dialog); it never reaches the stream.
	later := stream.Message[browserOrder]{Key: "order-later", Body: browserOrder{ID: 99, Customer: "ada"}}
	if _, err := producer.Send(ctx, topic, later, stream.WithDelay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	do("open the scheduled messages", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#topics")),
		chromedp.Click(css(`#topics a.delayed`)), chromedp.WaitVisible(css("#delayed")))
	if got := text("#delayed"); !strings.Contains(got, "order-later") || !strings.Contains(got, `"orderId":99`) {
		t.Fatalf("scheduled messages table:\n%s", got)
	}
	shot("delayed.png")
	confirmed := dialogs.Load()
	do("cancel it", chromedp.Click(css(`#delayed input.sel`)), chromedp.Click(css("#cancel-selected")), chromedp.WaitVisible(css("#notice")))
	if got := text("#notice"); !strings.Contains(got, "1 of 1 selected scheduled messages cancelled") {
		t.Fatalf("cancel notice: %q", got)
	}
	if dialogs.Load() == confirmed {
		t.Error("cancelling a scheduled message asked for no confirmation")
	}
	if n, err := producer.Scheduled(ctx, topic); err != nil || n != 0 {
		t.Fatalf("%d messages still scheduled (%v) after the cancel", n, err)
	}
	// Another, delivered now from the page: it is in the stream at once, and handled.
	early := stream.Message[browserOrder]{Key: "order-early", Body: browserOrder{ID: 98, Customer: "ada"}}
	if _, err := producer.Send(ctx, topic, early, stream.WithDelay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	do("deliver it now", chromedp.Navigate(base+"/delayed?t="+topic), chromedp.WaitVisible(css("#delayed input.sel")),
		chromedp.Click(css(`#delayed input.sel`)), chromedp.Click(css("#deliver-now")), chromedp.WaitVisible(css("#notice")))
	if got := text("#notice"); !strings.Contains(got, "1 of 1 selected scheduled messages delivered now") {
		t.Fatalf("deliver-now notice: %q", got)
	}
	waitFor(t, 15*time.Second, "the handler to handle order 98 delivered now", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled[98] == 1
	})

	// The topic's entries, searched by key: order-early's entry alone.
	do("search the entries", chromedp.Navigate(base+"/topic?t="+topic), chromedp.WaitVisible(css("#groups")),
		chromedp.Click(css("#entries-link")), chromedp.WaitVisible(css("#entries")),
		chromedp.SendKeys(css(`input[name="key"]`), "order-early"), chromedp.Click(css("#search")), chromedp.WaitVisible(css("#scanned")))
	if got := text("#entries"); !strings.Contains(got, "order-early") || strings.Contains(got, "order-1") {
		t.Fatalf("the entries searched by key:\n%s", got)
	}
	shot("entries.png")

	// The rate limits: look up ada's sign-in key; the page shows what the engine peeks.
	do("open the limits page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#topics")),
		chromedp.Click(css("#nav-limits")), chromedp.WaitVisible(css("#limiters")))
	if got := text("#limiters"); !strings.Contains(got, "login") || !strings.Contains(got, "hourly") || !strings.Contains(got, "100 per 1h0m0s") {
		t.Fatalf("limiters table:\n%s", got)
	}
	do("look up a sign-in key", chromedp.SetValue(css("#lookup-limiter"), "login"),
		chromedp.SendKeys(css("#lookup-key"), "ada@example.com"), chromedp.Click(css("#lookup-go")),
		chromedp.WaitVisible(css("#state")))
	rowsOf := func() [][4]string {
		t.Helper()
		rows, err := chromedp.Run(bctx, chromedp.Evaluate[[][4]string](`Array.from(document.querySelectorAll("#state tbody tr")).map(r => [r.dataset.available, r.dataset.remaining, r.dataset.resetMs, r.dataset.allowed])`))
		if err != nil {
			t.Fatalf("browser: the state rows: %v", err)
		}
		return rows
	}
	shown2 := rowsOf()
	peeked, err := loginLimiter.PeekEach(ctx, "ada@example.com", time.Time{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(shown2) != 3 {
		t.Fatalf("%d state rows, want the 2 limits and the request: %v", len(shown2), shown2)
	}
	for i, d := range peeked {
		avail := d.Remaining
		if d.Allowed {
			avail++
		}
		resetMs, _ := strconv.ParseInt(shown2[i][2], 10, 64)
		if shown2[i][0] != strconv.FormatInt(avail, 10) || shown2[i][3] != strconv.FormatBool(d.Allowed) ||
			(time.Duration(resetMs)*time.Millisecond-d.ResetAfter).Abs() > 5*time.Second {
			t.Errorf("limit %d shown %v; the engine peeks %+v", i, shown2[i], d)
		}
	}
	if shown2[0][0] != "0" || shown2[1][0] != "15" || shown2[2][3] != "false" {
		t.Errorf("rows %v, want the burst used up (0), 15 of the hourly 20 left, the request denied", shown2)
	}
	if got := text("#state"); !strings.Contains(got, "denied") || !strings.Contains(got, "burst") || !strings.Contains(got, "hourly") {
		t.Errorf("state table:\n%s", got)
	}
	shot("limits.png")

	// Reset ada's API key (confirming the dialog): the page then shows a full key.
	do("look up an API key", chromedp.Navigate(base+"/limits"+q("l", "api", "key", "customer:ada")), chromedp.WaitVisible(css("#state")))
	if r := rowsOf(); len(r) != 1 || r[0][0] != "93" || r[0][1] != "92" {
		t.Fatalf("api key rows %v, want 93 available and 92 after a request", r)
	}
	before := dialogs.Load()
	do("reset it", chromedp.Click(css("#reset")), chromedp.WaitVisible(css("#notice")))
	if dialogs.Load() <= before {
		t.Error("reset asked for no confirmation")
	}
	if r := rowsOf(); len(r) != 1 || r[0][0] != "100" {
		t.Fatalf("after reset rows %v, want 100 available", r)
	}
	// The reset redirected to the key's page (POST-redirect-GET), which says plainly that no
	// state is stored under the key now; reloading it posts nothing again.
	loc, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatalf("browser: location: %v", err)
	}
	if !strings.Contains(loc, "/limits?") || !strings.Contains(loc, "done=reset") {
		t.Errorf("after reset the browser is at %q, want the key's limits page", loc)
	}
	if got := text("#no-state"); !strings.Contains(got, "No state is stored under this Redis key") {
		t.Errorf("no-state notice %q", got)
	}
	before = dialogs.Load()
	do("reload the page", chromedp.Reload(), chromedp.WaitVisible(css("#state")))
	if dialogs.Load() != before {
		t.Error("reloading the page after a reset asked to post again")
	}
	if d, err := api.AllowN(ctx, "customer:ada", time.Time{}, 1); err != nil || d.Remaining != 99 {
		t.Fatalf("after reset the engine decides %+v, %v; want 99 remaining", d, err)
	}

	// The periodic schedules: a nightly report of the orders topic, paused from its page.
	sched, err := periodic.New(client, periodic.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Add(ctx, periodic.Schedule{Name: "nightly-report", Topic: topic, Cron: "0 3 * * *", TimeZone: "Europe/Paris"}); err != nil {
		t.Fatal(err)
	}
	do("open the schedules page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#topics")),
		chromedp.Click(css("#nav-periodic")), chromedp.WaitVisible(css("#schedules")))
	shot("schedules.png")
	before = dialogs.Load()
	do("pause the report", chromedp.Click(css(`tr[data-name="nightly-report"] button[value="pause"]`)), chromedp.WaitVisible(css("#notice")))
	if dialogs.Load() <= before {
		t.Error("pause asked for no confirmation")
	}
	if got := attr(`tr[data-name="nightly-report"]`, "data-paused"); got != "true" {
		t.Errorf("after pause the row says data-paused=%q", got)
	}
	if infos, err := sched.List(ctx, topic); err != nil || len(infos) != 1 || !infos[0].Paused {
		t.Fatalf("after pause from the page: %+v, %v", infos, err)
	}
	do("resume the report", chromedp.Click(css(`tr[data-name="nightly-report"] button[value="resume"]`)),
		chromedp.WaitVisible(css(`tr[data-name="nightly-report"][data-paused="false"]`)))
	do("remove the report", chromedp.Click(css(`tr[data-name="nightly-report"] button[value="remove"]`)), chromedp.WaitVisible(css("#no-schedules")))
	if infos, err := sched.List(ctx, topic); err != nil || len(infos) != 0 {
		t.Fatalf("after remove from the page: %+v, %v", infos, err)
	}

	// The last dead letter replayed with "replay all"; then two more purged after typing the
	// topic's name.
	do("replay all", chromedp.Navigate(base+"/dlq?t="+topic), chromedp.WaitVisible(css("#replay-all")),
		chromedp.Click(css("#replay-all")), chromedp.WaitVisible(css("#result")))
	if n := xlen(t, client, dlq); n != 0 {
		t.Fatalf("%d dead letters left after replay all", n)
	}
	for range 2 {
		if err := client.Do(ctx, client.B().Xadd().Key(dlq).Id("*").FieldValue().FieldValue("key", "k").FieldValue("enc", "plain").
			FieldValue("body", "{}").FieldValue("dl_group", "billing").FieldValue("dl_error", "boom").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	do("purge", chromedp.Navigate(base+"/dlq?t="+topic), chromedp.WaitVisible(css("#purge-link")), chromedp.Click(css("#purge-link")),
		chromedp.WaitVisible(css("#confirm")), chromedp.SendKeys(css("#confirm"), topic), chromedp.Click(css("#purge")),
		chromedp.WaitVisible(css("#result")))
	if got := text("#result"); !strings.Contains(got, "2") {
		t.Errorf("purge result: %q", got)
	}
	if n := xlen(t, client, dlq); n != 0 {
		t.Fatalf("%d dead letters left after the purge", n)
	}

	// The overview reloads itself when asked.
	do("reload every 5 s", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#refresh")), chromedp.Click(css(`#refresh a[href$="refresh=5"]`)),
		chromedp.WaitVisible(css(`#refresh a[href="/"]`)))
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('meta[http-equiv="refresh"][content="5"]').length`)); err != nil || n != 1 {
		t.Errorf("the overview does not reload every 5 s: %d, %v", n, err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("timed out waiting for " + what))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// plantMillion writes 1,000,000 dead letters of topic (pipelined), 12 of them at random
// places with a body holding needle, and returns those 12's ids.
func plantMillion(t *testing.T, c rueidis.Client, topic, needle string) map[string]bool {
	t.Helper()
	const n, batch = 1_000_000, 10_000
	planted := map[int]bool{}
	for len(planted) < 12 {
		planted[rand.IntN(n)] = true
	}
	key := streamwire.DeadLetterStreamName(topic)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	ids := map[string]bool{}
	start := time.Now()
	for i := 0; i < n; i += batch {
		cmds := make(rueidis.Commands, 0, batch)
		for k := i; k < i+batch; k++ {
			body := fmt.Sprintf(`{"orderId":%d,"customer":"bob"}`, k)
			if planted[k] {
				body = fmt.Sprintf(`{"orderId":%d,"customer":"%s"}`, k, needle)
			}
			cmds = append(cmds, c.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("key", "order-"+strconv.Itoa(k)).
				FieldValue("enc", "plain").FieldValue("body", body).FieldValue("ts", now).FieldValue("dl_id", "1-1").
				FieldValue("dl_group", "billing").FieldValue("dl_consumer", "c1").FieldValue("dl_deliveries", "2").
				FieldValue("dl_error", "payment service down").FieldValue("dl_ts", now).Build())
		}
		for j, r := range c.DoMulti(context.Background(), cmds...) {
			id, err := r.ToString()
			if err != nil {
				t.Fatal(err)
			}
			if planted[i+j] {
				ids[id] = true
			}
		}
	}
	t.Logf("wrote %d dead letters in %v", n, time.Since(start))
	return ids
}
