package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"

	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/periodic"
)

// Defaults and bounds of Options.
const (
	DefaultTimeout      = 5 * time.Second // bound of each Redis call
	DefaultPageSize     = 50              // entries per page
	MaxPageSize         = 500             // largest PageSize accepted
	DefaultMaxBodyBytes = 64 << 10        // bytes of a decoded body shown
	DefaultMaxTopics    = 1000            // most topics found by SCAN
	MaxMaxTopics        = 100000          // largest MaxTopics accepted
)

// Options configures a Console. The zero value of every field but Client means its default.
type Options struct {
	// Client is the Redis connection (a single server or a cluster client). Required. The
	// Console does not close it.
	Client rueidis.Client
	// Stream is the configuration the application's producers and consumers use. The console
	// reads from it: EnvIsolation and Env (to map Topics to stream keys), ConsumerTimeout (to
	// mark the consumers that housekeeping will remove), the Trim and DeadLetter settings (shown
	// on each topic, since Redis does not record them), and Metrics (where replays, deletes and
	// purges are counted). Its zero value is the default configuration.
	Stream stream.Config
	// Topics lists the topics to show. Empty means every stream key that SCAN finds (on every
	// master of a cluster), up to MaxTopics. With EnvIsolation, each topic maps to its
	// environment's stream key.
	Topics []string
	// MaxTopics bounds how many stream keys topic discovery collects. Default
	// DefaultMaxTopics; at most MaxMaxTopics. The page says when the bound was reached.
	MaxTopics int
	// Prefix is the path the console is mounted at, for example "/ops/streams" (mount the
	// handler at Prefix + "/"). Default "/": the root. Requests outside Prefix get 404.
	Prefix string
	// ReadOnly removes every action: pages show no forms and every POST is refused (403).
	ReadOnly bool
	// Secret keys the CSRF tokens. Empty means 32 random bytes chosen by New (tokens then
	// stop working when the process restarts, and differ between replicas of the application
	// behind a load balancer without sticky sessions: set it in that case). At least 16
	// bytes when set.
	Secret []byte
	// TrustedOrigins are origins ("https://ops.example.com") allowed to POST although they
	// differ from the request's Host, for a console behind a proxy that rewrites Host.
	TrustedOrigins []string
	// Timeout bounds each Redis call. Default DefaultTimeout.
	Timeout time.Duration
	// PageSize is the most entries one page shows. Default DefaultPageSize; at most
	// MaxPageSize.
	PageSize int
	// MaxBodyBytes is the most bytes of a decoded body (and of any other field value) shown
	// on a dead letter's page; the rest is cut, and the page says so. Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int
	// Title is the page title. Default "redstream console".
	Title string
	// Consumers are this process's consumers, if any: the group page then also shows the
	// state of their handlers of that group (reading, in flight, queued, retries scheduled;
	// from Consumer.Stats, no Redis call).
	Consumers []*stream.Consumer
	// Limiters are the rate limiters whose keys the limits page looks up, by name (for
	// example the entries of config's RateLimit.Registry). Each is a [Peeker] or wraps one
	// (metrics.NamedLimiter and redstream.MultiLimiter are unwrapped, and a MultiLimiter's
	// limit names are shown); a limiter that is neither is an error of New. A limiter that
	// is also a [Resetter] gets a "reset key" button, unless ReadOnly. Empty: the page only
	// says that no limiter is configured. An in-process (memory) limiter shows the state of
	// this process only.
	Limiters map[string]redstream.Limiter
	// Logger receives a record for each state-changing action (replay, delete, purge) and
	// each Redis error. Nil means slog.Default().
	Logger *slog.Logger
}

// Console is the operator console: an http.Handler. It is safe for concurrent use.
type Console struct {
	client    rueidis.Client
	cfg       stream.Config // the application's configuration, with defaults
	dl        *stream.DeadLetters
	producer  *stream.Producer // cancels and delivers scheduled messages (topics as stream keys)
	discoMu   sync.Mutex       // guards disco and discoAt: the last discovery of the topics
	disco     discovery
	discoAt   time.Time
	topics    []string // explicit stream keys, or nil for discovery
	maxTopics int
	prefix    string // "" for the root, else "/x/y" without a trailing slash
	readOnly  bool
	secret    []byte
	cop       *http.CrossOriginProtection
	timeout   time.Duration
	pageSize  int
	maxBody   int
	title     string
	log       *slog.Logger
	consumers []*stream.Consumer
	limiters  []limiterEntry      // by name
	results   resultStore         // results of recent actions (POST-redirect-GET)
	periodic  *periodic.Scheduler // administers the periodic schedules (never started)
	mux       *http.ServeMux
}

// New returns a Console for o. An invalid option is an error wrapping
// redstream.ErrInvalidConfig that names it.
func New(o Options) (*Console, error) {
	if o.Client == nil {
		return nil, invalid("nil Client")
	}
	if err := o.Stream.Validate(); err != nil {
		return nil, fmt.Errorf("console: Stream: %w", err)
	}
	c := &Console{client: o.Client, cfg: o.Stream.WithDefaults(), readOnly: o.ReadOnly, log: o.Logger, title: o.Title}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.title == "" {
		c.title = "redstream console"
	}
	for _, step := range []func(Options) error{c.initTopics, c.initSecurity, c.initSizes, c.initSubjects} {
		if err := step(o); err != nil {
			return nil, err
		}
	}
	c.routes()
	return c, nil
}

// invalid is New's error for a bad option.
func invalid(format string, args ...any) error {
	return fmt.Errorf("console: %s: %w", fmt.Sprintf(format, args...), redstream.ErrInvalidConfig)
}

// initTopics sets the dead-letter administration and the configured topics' stream keys.
func (c *Console) initTopics(o Options) error {
	// The console addresses topics by their stream keys; env isolation was applied already.
	dlCfg := o.Stream
	dlCfg.EnvIsolation, dlCfg.Env = false, ""
	dl, err := stream.NewDeadLetters(o.Client, dlCfg)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	c.dl = dl
	// The scheduled messages' actions, on the listed stream keys (no env isolation, no
	// partitions: each partition's stream is listed on its own), counted in a set of its own.
	if c.producer, err = stream.NewProducer(o.Client, stream.Config{Metrics: vm.NewSet()}); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	// A Scheduler that is never started: its List, Pause, Resume and Remove administer the
	// schedules any process registered (the topics' stream keys as the application's).
	if c.periodic, err = periodic.New(o.Client, periodic.Options{Stream: o.Stream, Timeout: c.timeoutOr(o.Timeout), Logger: c.log}); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	seen := map[string]bool{}
	for _, t := range o.Topics {
		key, err := streamwire.StreamKey(t, o.Stream.EnvIsolation, o.Stream.Env)
		if err != nil {
			return fmt.Errorf("console: Topics: %w", err)
		}
		if !seen[key] {
			seen[key] = true
			c.topics = append(c.topics, key)
		}
	}
	return nil
}

// timeoutOr returns the call timeout of Options.Timeout t (DefaultTimeout for 0; a bad value
// is initSizes' error).
func (c *Console) timeoutOr(t time.Duration) time.Duration {
	if t <= 0 {
		return DefaultTimeout
	}
	return t
}

// initSecurity sets the path prefix, the CSRF secret and the cross-origin protection.
func (c *Console) initSecurity(o Options) error {
	p := strings.TrimRight(o.Prefix, "/")
	if p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#\"'<> \t\r\n")) {
		return invalid("Prefix %q must be a path starting with '/'", o.Prefix)
	}
	c.prefix = p
	switch {
	case len(o.Secret) == 0:
		c.secret = make([]byte, 32)
		if _, err := rand.Read(c.secret); err != nil {
			return fmt.Errorf("console: random secret: %w", err)
		}
	case len(o.Secret) < 16:
		return invalid("Secret of %d bytes, want at least 16", len(o.Secret))
	default:
		c.secret = append([]byte(nil), o.Secret...)
	}
	c.cop = http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := c.cop.AddTrustedOrigin(origin); err != nil {
			return invalid("TrustedOrigins: %v", err)
		}
	}
	c.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusForbidden, "cross-origin request refused")
	}))
	return nil
}

// initSizes sets the bounds: topics listed, call timeout, page size, body bytes shown.
func (c *Console) initSizes(o Options) error {
	var err error
	if c.maxTopics, err = bounded("MaxTopics", o.MaxTopics, DefaultMaxTopics, MaxMaxTopics); err != nil {
		return err
	}
	if c.timeout, err = bounded("Timeout", o.Timeout, DefaultTimeout, -1); err != nil {
		return err
	}
	if c.pageSize, err = bounded("PageSize", o.PageSize, DefaultPageSize, MaxPageSize); err != nil {
		return err
	}
	c.maxBody, err = bounded("MaxBodyBytes", o.MaxBodyBytes, DefaultMaxBodyBytes, -1)
	return err
}

// bounded returns v, or def when v is 0; a negative v, or one above hi when hi >= 0, is an
// error naming the option.
func bounded[T int | time.Duration](name string, v, def, hi T) (T, error) {
	switch {
	case v < 0 && hi < 0:
		return 0, invalid("negative %s %v", name, v)
	case v < 0 || (hi >= 0 && v > hi):
		return 0, invalid("%s %v out of range 0..%v", name, v, hi)
	case v == 0:
		return def, nil
	}
	return v, nil
}

// initSubjects sets the consumers and limiters the console shows.
func (c *Console) initSubjects(o Options) error {
	for _, cons := range o.Consumers {
		if cons == nil {
			return invalid("nil entry in Consumers")
		}
	}
	c.consumers = append([]*stream.Consumer(nil), o.Consumers...)
	for name, l := range o.Limiters {
		if name == "" {
			return invalid("Limiters: empty name")
		}
		e, err := newLimiterEntry(name, l)
		if err != nil {
			return invalid("Limiters[%q]: %v", name, err)
		}
		c.limiters = append(c.limiters, e)
	}
	sort.Slice(c.limiters, func(i, j int) bool { return c.limiters[i].Name < c.limiters[j].Name })
	return nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.pageTopics)
	m.HandleFunc("GET /topic", c.pageTopic)
	m.HandleFunc("GET /group", c.pageGroup)
	m.HandleFunc("GET /dlq", c.pageDeadLetters)
	m.HandleFunc("GET /dlq/entry", c.pageDeadLetter)
	m.HandleFunc("GET /dlq/purge", c.pagePurge)
	m.HandleFunc("GET /limits", c.pageLimits)
	m.HandleFunc("GET /periodic", c.pagePeriodic)
	m.HandleFunc("GET /result", c.pageResult)
	m.HandleFunc("GET /delayed", c.pageDelayed)
	m.HandleFunc("GET /entries", c.pageEntries)
	m.HandleFunc("GET /history", c.pageHistory)
	m.HandleFunc("GET /static/console.css", c.static("text/css; charset=utf-8", consoleCSS))
	m.HandleFunc("GET /static/console.js", c.static("text/javascript; charset=utf-8", consoleJS))
	m.Handle("POST /dlq/replay", c.action(c.doReplay))
	m.Handle("POST /dlq/delete", c.action(c.doDelete))
	m.Handle("POST /dlq/purge", c.action(c.doPurge))
	m.Handle("POST /dlq/replay-all", c.action(c.doReplayAll))
	m.Handle("POST /limits/reset", c.action(c.doResetKey))
	m.Handle("POST /periodic/action", c.action(c.doPeriodic))
	m.Handle("POST /delayed/action", c.action(c.doDelayed))
	for _, p := range []string{"/dlq/replay", "/dlq/delete", "/dlq/replay-all", "/limits/reset", "/periodic/action", "/delayed/action"} {
		m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", http.MethodPost)
			c.fail(w, r, http.StatusMethodNotAllowed, "this action needs a POST from the console's own form")
		})
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "no such page")
	})
	c.mux = m
}

// ServeHTTP serves the console's pages under Options.Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	path := r.URL.Path
	if c.prefix != "" {
		rest, ok := strings.CutPrefix(path, c.prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			c.fail(w, r, http.StatusNotFound, "no such page")
			return
		}
		if rest == "" {
			http.Redirect(w, r, c.prefix+"/", http.StatusFound)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = rest, ""
		r2.URL = &u
		r = r2
	}
	c.mux.ServeHTTP(w, r)
}

// link returns the absolute path of console page p ("/dlq") under the prefix.
func (c *Console) link(p string) string { return c.prefix + p }

// static serves an embedded asset.
func (c *Console) static(ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write([]byte(body))
	}
}

// CSRF: a random per-browser cookie, and a token that is the HMAC of it under the console's
// secret. A page embeds the token in each form; a POST must carry both, and the token must
// match in constant time. An attacker's page can neither read the token nor set the cookie.
const (
	csrfCookie  = "redstream_console_csrf"
	csrfField   = "csrf"
	maxFormSize = 1 << 20
)

// csrfToken returns the token for r's browser, setting the cookie when it has none.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && validCookie(ck.Value) {
		return c.sign(ck.Value)
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	path := c.prefix
	if path == "" {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: path, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return c.sign(v)
}

func validCookie(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 24
}

func (c *Console) sign(v string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("redstream console csrf\x00"))
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errCSRF = errors.New("missing or invalid CSRF token: reload the page and try again")

// checkCSRF reports whether r carries a valid cookie and token.
func (c *Console) checkCSRF(r *http.Request) error {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || !validCookie(ck.Value) {
		return errCSRF
	}
	got := r.PostFormValue(csrfField)
	if !hmac.Equal([]byte(got), []byte(c.sign(ck.Value))) {
		return errCSRF
	}
	return nil
}

// action wraps a state-changing handler: cross-origin check, read-only mode, form size, and
// the CSRF token.
func (c *Console) action(f func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return c.cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.readOnly {
			c.fail(w, r, http.StatusForbidden, "the console is read-only")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormSize)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, http.StatusBadRequest, "bad form: "+err.Error())
			return
		}
		if err := c.checkCSRF(r); err != nil {
			c.fail(w, r, http.StatusForbidden, err.Error())
			return
		}
		f(w, r)
	}))
}
