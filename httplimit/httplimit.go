// Package httplimit is net/http middleware that rate-limits requests with any
// redstream.Limiter and advertises the limits with the IETF httpapi draft's header fields
// (draft-ietf-httpapi-ratelimit-headers, the structured-field form of drafts 08 and later):
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=42;t=17
//
// on every response it decides, plus Retry-After (whole seconds, rounded up) on the 429 Too
// Many Requests it sends when a request is denied. The package imports no engine: build the
// limiter with package memory, redisbackend or config.
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
)

// KeyFunc returns the rate-limit key of a request, e.g. a client IP, a user or an API key.
// An error (or an empty key) sends the request to Options.OnError.
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
	// Limiter decides each request. Its failure policy (redstream.WithFailurePolicy or the
	// engine's Options.FailurePolicy) says what happens when its backend fails.
	Limiter redstream.Limiter
	// Key returns each request's key.
	Key KeyFunc
	// Cost returns a request's cost, > 0. Nil means 1 per request.
	Cost func(r *http.Request) int64
	// Policies are advertised in RateLimit-Policy. When empty they are discovered from the
	// limiter: the named limits of a redstream.MultiLimiter, or the single Spec of an
	// engine, named after a metrics.NamedLimiter ("default" without one). When nothing is
	// discovered, each response advertises "default" with the Decision's Limit as quota.
	Policies []Policy
	// OnDenied writes the response to a denied request, after the rate-limit headers and
	// Retry-After are set. Nil writes "429 Too Many Requests" as text.
	OnDenied func(w http.ResponseWriter, r *http.Request, d redstream.Decision)
	// OnError writes the response when the key function fails or the limiter returns an
	// error. Nil writes 500 Internal Server Error for key errors and bad input, and 503
	// Service Unavailable for limiter errors.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
}

// Errors passed to Options.OnError.
var (
	// ErrKey wraps the key function's error (or reports an empty key).
	ErrKey = errors.New("httplimit: no rate-limit key")
	// ErrLimiter wraps the limiter's error.
	ErrLimiter = errors.New("httplimit: limiter failed")
)

// Middleware rate-limits HTTP requests. It is safe for concurrent use.
type Middleware struct {
	o        Options
	policies []Policy
	header   string // RateLimit-Policy, precomputed; "" when discovered per response
	failOpen bool
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
	m := &Middleware{o: o, policies: o.Policies}
	info := discover(o.Limiter)
	if len(m.policies) == 0 {
		m.policies = info.policies
	}
	m.failOpen = info.policy == redstream.FailOpen
	if len(m.policies) > 0 {
		m.header = policyHeader(m.policies)
	}
	return m, nil
}

// Policies returns the policies the middleware advertises (nil when they come from each
// Decision).
func (m *Middleware) Policies() []Policy { return append([]Policy(nil), m.policies...) }

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
		m.fail(w, r, fmt.Errorf("%w: %w", ErrKey, err), http.StatusInternalServerError)
		return
	}
	cost := int64(1)
	if m.o.Cost != nil {
		cost = m.o.Cost(r)
	}
	d, err := m.o.Limiter.AllowN(r.Context(), key, time.Time{}, cost)
	if err != nil {
		if redstream.IsBadInput(err) {
			m.fail(w, r, fmt.Errorf("%w: %w", ErrLimiter, err), http.StatusInternalServerError)
			return
		}
		if m.failOpen {
			next.ServeHTTP(w, r)
			return
		}
		m.fail(w, r, fmt.Errorf("%w: %w", ErrLimiter, err), http.StatusServiceUnavailable)
		return
	}
	m.setHeaders(w.Header(), d)
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

// setHeaders writes RateLimit-Policy and RateLimit for d. A decision without a Limit (a
// fail-open admission) carries no information and writes nothing.
func (m *Middleware) setHeaders(h http.Header, d redstream.Decision) {
	if d.Limit <= 0 {
		return
	}
	name := "default"
	if m.header != "" {
		h[hdrPolicy] = []string{m.header}
		name = m.policies[0].Name
		for _, p := range m.policies {
			if p.Quota == d.Limit {
				name = p.Name
				break
			}
		}
	} else {
		h[hdrPolicy] = []string{policyHeader([]Policy{{Name: name, Quota: d.Limit}})}
	}
	buf := make([]byte, 0, 48)
	buf = appendSFString(buf, name)
	buf = append(buf, ";r="...)
	buf = strconv.AppendInt(buf, max(d.Remaining, 0), 10)
	buf = append(buf, ";t="...)
	buf = strconv.AppendInt(buf, ceilSeconds(d.ResetAfter, 0), 10)
	h[hdrRateLimit] = []string{string(buf)}
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
		b = strconv.AppendInt(b, p.Quota, 10)
		if p.Window > 0 {
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, ceilSeconds(p.Window, 1), 10)
		}
	}
	return string(b)
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

// limiterInfo is what New learns from the limiter's wrapper chain.
type limiterInfo struct {
	policies []Policy
	policy   redstream.FailurePolicy
}

// discover walks the Unwrap chain of l for a name (Name() string), a failure policy
// (FailurePolicy()) and the limits: Limits() []redstream.Limit, Specs() []redstream.Spec
// or Limits() []core.Limit.
func discover(l redstream.Limiter) limiterInfo {
	var (
		info   limiterInfo
		name   string
		params []core.Limit
		names  []string
		havePo bool
	)
	for depth := 0; l != nil && depth < 32; depth++ {
		if n, ok := l.(interface{ Name() string }); ok && name == "" {
			name = n.Name()
		}
		if f, ok := l.(interface {
			FailurePolicy() redstream.FailurePolicy
		}); ok && !havePo {
			info.policy, havePo = f.FailurePolicy(), true
		}
		if params == nil {
			switch v := l.(type) {
			case interface{ Limits() []redstream.Limit }:
				for _, lim := range v.Limits() {
					if p, err := lim.Spec.Core(); err == nil {
						params = append(params, p)
						names = append(names, lim.Name)
					}
				}
			case interface{ Specs() []redstream.Spec }:
				for _, s := range v.Specs() {
					if p, err := s.Core(); err == nil {
						params = append(params, p)
					}
				}
			case interface{ Limits() []core.Limit }:
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
		info.policies = append(info.policies, Policy{Name: n, Quota: p.Max(), Window: time.Duration(p.Period()) * time.Microsecond})
	}
	return info
}

// String returns the policy as one RateLimit-Policy item, e.g. "api";q=100;w=60.
func (p Policy) String() string { return policyHeader([]Policy{p}) }

var _ fmt.Stringer = Policy{}
