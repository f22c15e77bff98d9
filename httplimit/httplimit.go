// Package httplimit is net/http middleware that rate-limits requests with any
// redstream.Limiter and advertises the limits with the IETF httpapi draft's header fields
// (draft-ietf-httpapi-ratelimit-headers, the structured-field form of drafts 08 and later):
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=42;t=17
//
// on every response it decides, plus Retry-After (whole seconds, rounded up) on the 429 Too
// Many Requests it sends when a request is denied. Both fields are lists: stacked
// middlewares (a per-IP limit outside a per-user one, say) each add their own item, outer
// first, so a client sees every limit that applies to it:
//
//	RateLimit-Policy: "per-ip";q=1000;w=3600, "per-user";q=100;w=60
//	RateLimit: "per-ip";r=998;t=3599, "per-user";r=42;t=17
//
// Give stacked middlewares' limiters distinct names (metrics.Named): the name is how a
// client matches a RateLimit item to its policy.
//
// A limiter in shadow mode (redstream.Shadow) admits every request, and the middleware
// then writes no RateLimit-Policy, RateLimit or Retry-After: a limit on trial is not
// advertised, so that clients which pace themselves by those fields do not change the
// traffic the trial measures. Its shadow denials are counted by metrics.Named.
//
// A request without a key (the KeyFunc fails or returns "") is 400 Bad Request. When the
// limiter's backend fails, its failure policy (redstream.WithFailurePolicy) decides, inside
// the limiter, where it is counted; an error that still reaches the middleware is 503. The
// package imports no engine: build the limiter with package memory, redisbackend or config.
//
// [NewConcurrency] caps the requests in progress per key instead, with leases of a
// redstream.ConcurrencyLimiter released when each handler returns.
package httplimit

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/failure"
)

// KeyFunc returns the rate-limit key of a request, e.g. a client IP, a user or an API key.
// An error (or an empty key) sends the request to Options.OnError with ErrKey (400 Bad
// Request by default): the request lacks what the limit is keyed by.
type KeyFunc func(r *http.Request) (string, error)

// ByRemoteIP keys requests by the IP of r.RemoteAddr (the port is dropped). It does not read
// forwarding headers such as X-Forwarded-For, which clients can forge; behind a proxy, write
// a KeyFunc that trusts exactly your proxy's header.
func ByRemoteIP(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host == "" {
		return "", errors.New("httplimit: request has no RemoteAddr")
	}
	return host, nil
}

// ByHeader keys requests by the value of the named header (e.g. an API key); a request
// without it is an error.
func ByHeader(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v := r.Header.Get(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("httplimit: request has no %s header", name)
	}
}

// Policy is one quota advertised in RateLimit-Policy: Quota units per Window.
type Policy struct {
	// Name identifies the policy in both header fields. Characters outside printable
	// ASCII are replaced by '_'.
	Name string
	// Quota is the most a key can spend at once (the "q" parameter); > 0.
	Quota int64
	// Window is the time over which the quota is granted (the "w" parameter, whole
	// seconds rounded up); 0 leaves "w" out.
	Window time.Duration
}

// Options configures a Middleware. Limiter and Key are required; every other field has a
// default.
type Options struct {
	// Limiter decides each request. Its failure policy (redstream.WithFailurePolicy) says
	// what happens when its backend fails, and counts it: a fail-open or fallback limiter
	// answers with a Decision, and the middleware serves that Decision like any other (a
	// fail-open admission, which has no Limit, writes no RateLimit fields). The middleware
	// applies no policy of its own: an error that reaches it is answered 503.
	Limiter redstream.Limiter
	// Key returns each request's key.
	Key KeyFunc
	// Cost returns a request's cost, > 0. Nil means 1 per request.
	Cost func(r *http.Request) int64
	// Policies are advertised in RateLimit-Policy. When empty they are discovered from the
	// limiter: the rules of a redstream.Multi limiter, or the single Spec of an
	// engine, named after a metrics.NamedLimiter ("default" without one). When nothing is
	// discovered, each response advertises "default" with the Decision's Limit as quota.
	Policies []Policy
	// OnDenied writes the response to a denied request, after the rate-limit headers and
	// Retry-After are set. Nil writes "429 Too Many Requests" as text.
	OnDenied func(w http.ResponseWriter, r *http.Request, d redstream.Decision)
	// OnError writes the response when the key function fails or the limiter returns an
	// error. Nil writes 400 Bad Request for ErrKey (no key, or an empty one, and the
	// limiter's redstream.ErrEmptyKey), 500 Internal Server Error for other bad input (a
	// Cost function's invalid cost, or redisbackend.ErrTooLarge), and 503 Service Unavailable for
	// backend errors.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
}

// Errors passed to Options.OnError.
var (
	// ErrKey wraps the key function's error (or reports an empty key); 400 by default.
	ErrKey = errors.New("httplimit: no rate-limit key")
	// ErrLimiter wraps the limiter's error; 503 by default, 500 for bad input.
	ErrLimiter = errors.New("httplimit: limiter failed")
)

// Middleware rate-limits HTTP requests. It is safe for concurrent use.
type Middleware struct {
	o        Options
	policies []Policy
	header   string // RateLimit-Policy, precomputed; "" when discovered per response
	shadow   bool   // the limiter is in shadow mode: no header fields
}

// New returns a middleware, or an error wrapping redstream.ErrInvalidConfig for a nil
// Limiter or Key, or an invalid Policy.
func New(o Options) (*Middleware, error) {
	if o.Limiter == nil {
		return nil, fmt.Errorf("httplimit: %w: Options.Limiter is nil", redstream.ErrInvalidConfig)
	}
	if o.Key == nil {
		return nil, fmt.Errorf("httplimit: %w: Options.Key is nil", redstream.ErrInvalidConfig)
	}
	for i, p := range o.Policies {
		if p.Name == "" || p.Quota <= 0 || p.Window < 0 {
			return nil, fmt.Errorf("httplimit: %w: Options.Policies[%d] = %+v, want a name, Quota > 0 and Window >= 0", redstream.ErrInvalidConfig, i, p)
		}
	}
	m := &Middleware{o: o, policies: o.Policies, shadow: inShadow(o.Limiter)}
	if len(m.policies) == 0 {
		m.policies = discover(o.Limiter)
	}
	if len(m.policies) > 0 {
		m.header = policyHeader(m.policies)
	}
	return m, nil
}

// Wrap returns next behind the rate limit.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := m.o.Key(r)
	if err == nil && key == "" {
		err = errors.New("empty key")
	}
	if err != nil {
		m.fail(w, r, fmt.Errorf("%w: %w", ErrKey, err), http.StatusBadRequest)
		return
	}
	cost := int64(1)
	if m.o.Cost != nil {
		cost = m.o.Cost(r)
	}
	d, err := m.o.Limiter.AllowN(r.Context(), key, time.Time{}, cost)
	if err != nil {
		status := http.StatusServiceUnavailable
		switch {
		case errors.Is(err, redstream.ErrEmptyKey):
			status = http.StatusBadRequest
		case failure.IsBadInput(err):
			status = http.StatusInternalServerError
		}
		m.fail(w, r, fmt.Errorf("%w: %w", ErrLimiter, err), status)
		return
	}
	if !m.shadow && !d.Shadow {
		m.setHeaders(w.Header(), d)
	}
	if !d.Allowed {
		w.Header()[hdrRetryAfter] = []string{strconv.FormatInt(ceilSeconds(d.RetryAfter, 1), 10)}
		if m.o.OnDenied != nil {
			m.o.OnDenied(w, r, d)
			return
		}
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	next.ServeHTTP(w, r)
}

func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, err error, status int) {
	if m.o.OnError != nil {
		m.o.OnError(w, r, err)
		return
	}
	http.Error(w, http.StatusText(status), status)
}

// Canonical header keys (http.CanonicalHeaderKey of RateLimit-Policy, RateLimit and
// Retry-After), set directly to spare a canonicalization per response.
const (
	hdrPolicy     = "Ratelimit-Policy"
	hdrRateLimit  = "Ratelimit"
	hdrRetryAfter = "Retry-After"
)

// setHeaders adds this middleware's items to RateLimit-Policy and RateLimit for d, after
// the items an outer middleware wrote. A decision without a Limit (a fail-open admission)
// carries no information and adds nothing.
func (m *Middleware) setHeaders(h http.Header, d redstream.Decision) {
	if d.Limit <= 0 {
		return
	}
	name := "default"
	if m.header != "" {
		addItems(h, hdrPolicy, m.header)
		name = m.policies[0].Name
		for _, p := range m.policies {
			if p.Quota == d.Limit {
				name = p.Name
				break
			}
		}
	} else {
		addItems(h, hdrPolicy, policyHeader([]Policy{{Name: name, Quota: d.Limit}}))
	}
	buf := make([]byte, 0, 48)
	buf = appendSFString(buf, name)
	buf = append(buf, ";r="...)
	buf = appendSFInt(buf, d.Remaining)
	buf = append(buf, ";t="...)
	buf = appendSFInt(buf, ceilSeconds(d.ResetAfter, 0))
	addItems(h, hdrRateLimit, string(buf))
}

// addItems adds items (one or more list members) to the structured-field list in header
// field k: a field value of its own when there is none yet, else appended to the last
// field line after ", ". RFC 9651 (section 3.1) reads the lines of a list field joined with
// commas, so this is the same list as a new line, and Header.Get still returns all of it
// when every writer is a Middleware.
func addItems(h http.Header, k, items string) {
	v := h[k]
	if len(v) == 0 || v[len(v)-1] == "" {
		h[k] = []string{items}
		return
	}
	v[len(v)-1] += ", " + items
}

// policyHeader formats policies as a RateLimit-Policy list.
func policyHeader(ps []Policy) string {
	var b []byte
	for i, p := range ps {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendSFString(b, p.Name)
		b = append(b, ";q="...)
		b = appendSFInt(b, p.Quota)
		if p.Window > 0 {
			b = append(b, ";w="...)
			b = appendSFInt(b, ceilSeconds(p.Window, 1))
		}
	}
	return string(b)
}

// sfMaxInt is the largest RFC 9651 Integer (15 decimal digits).
const sfMaxInt = 999_999_999_999_999

// appendSFInt appends n as an RFC 9651 Integer, clamped to [0, sfMaxInt]: the fields carry
// counts and seconds, never negative, and a value past 15 digits would make the whole field
// unparseable (a quota that large is "unlimited" to any client).
func appendSFInt(b []byte, n int64) []byte {
	return strconv.AppendInt(b, min(max(n, 0), sfMaxInt), 10)
}

// appendSFString appends s as an RFC 9651 structured-field string: printable ASCII, with
// '"' and '\' escaped; other bytes become '_'.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// ceilSeconds returns d in whole seconds rounded up, at least min.
func ceilSeconds(d time.Duration, min int64) int64 {
	if d <= 0 {
		return min
	}
	s := int64(math.Ceil(d.Seconds()))
	if s < min {
		return min
	}
	return s
}

// discover walks the Unwrap chain of l for a name (Name() string) and the limits:
// Rules() []redstream.Rule (redstream.Multi), Specs() []redstream.Spec or Limits() []core.Limit.
func discover(l redstream.Limiter) []Policy {
	var (
		policies []Policy
		name     string
		params   []core.Limit
		names    []string
	)
	for depth := 0; l != nil && depth < 32; depth++ {
		if n, ok := l.(interface{ Name() string }); ok && name == "" {
			name = n.Name()
		}
		if params == nil {
			switch v := l.(type) {
			case interface{ Rules() []redstream.Rule }:
				for _, r := range v.Rules() {
					if p, err := r.Spec.Core(); err == nil {
						params = append(params, p)
						names = append(names, r.Name)
					}
				}
			case interface{ Specs() []redstream.Spec }:
				for _, s := range v.Specs() {
					if p, err := s.Core(); err == nil {
						params = append(params, p)
					}
				}
			case interface{ Limits() []core.Limit }: // wasmcore
				params = v.Limits()
			}
		}
		u, ok := l.(interface{ Unwrap() redstream.Limiter })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	if name == "" {
		name = "default"
	}
	for i, p := range params {
		n := name
		switch {
		case i < len(names):
			n = names[i]
		case len(params) > 1:
			n = name + "-" + strconv.Itoa(i)
		}
		policies = append(policies, Policy{Name: n, Quota: p.Max(), Window: time.Duration(p.Period()) * time.Microsecond})
	}
	return policies
}

// inShadow reports whether the Unwrap chain of l holds a limiter in shadow mode
// (redstream.Shadow, which has a method Shadow() bool).
func inShadow(l redstream.Limiter) bool {
	for depth := 0; l != nil && depth < 32; depth++ {
		if s, ok := l.(interface{ Shadow() bool }); ok && s.Shadow() {
			return true
		}
		u, ok := l.(interface{ Unwrap() redstream.Limiter })
		if !ok {
			return false
		}
		l = u.Unwrap()
	}
	return false
}

// String returns the policy as one RateLimit-Policy item, e.g. "api";q=100;w=60.
func (p Policy) String() string { return policyHeader([]Policy{p}) }

var _ fmt.Stringer = Policy{}
