package console

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/redisbackend"
)

// Peeker is a rate limiter whose keys the console can look up without changing them.
// *redisbackend.Limiter and *memory.Limiter implement it.
type Peeker interface {
	// Specs returns the limiter's specs, in the order of PeekEach's decisions.
	Specs() []redstream.Spec
	// PeekEach returns, spec by spec, the decision a request of cost n for key at now
	// would get, recording nothing. The zero now is the engine's clock.
	PeekEach(ctx context.Context, key string, now time.Time, n int64) ([]redstream.Decision, error)
}

// Resetter is implemented by limiters that can forget a key (*redisbackend.Limiter): the
// limits page then offers "reset key" (a POST with CSRF token, not in read-only mode).
type Resetter interface {
	Reset(ctx context.Context, key string) error
}

// MaxKeyBytes is the longest rate-limit key the limits page looks up (after hex decoding).
const MaxKeyBytes = 8192

// limiterEntry is one configured limiter as the console holds it.
type limiterEntry struct {
	Name   string
	Kind   string // the engine's type, e.g. "*redisbackend.Limiter"
	Prefix string // Redis key prefix, when the engine has one
	Limits []limitInfo
	peeker Peeker
	reset  Resetter
	denied func(n int) []redisbackend.DeniedKey // the engine's keys denied from memory, when it keeps them
	keys   func(string) []string                // the engine's Redis keys of a user key, when it has them
}

// limitInfo describes one limit of a limiter.
type limitInfo struct {
	Name      string // the limit's name in a redstream.MultiLimiter, else ""
	Algorithm string
	Desc      string
}

// unwrapper is a limiter that wraps another (metrics.NamedLimiter, a redstream.Multi limiter).
type unwrapper interface{ Unwrap() redstream.Limiter }

// newLimiterEntry finds the Peeker in l, unwrapping wrappers, and describes its limits.
func newLimiterEntry(name string, l redstream.Limiter) (limiterEntry, error) {
	e := limiterEntry{Name: name}
	var names []string
	for depth := 0; ; depth++ {
		if l == nil || depth > 16 {
			return e, fmt.Errorf("no limiter the console can inspect")
		}
		if m, ok := l.(interface{ Rules() []redstream.Rule }); ok && names == nil {
			for _, r := range m.Rules() {
				names = append(names, r.Name)
			}
		}
		if p, ok := l.(Peeker); ok {
			e.peeker = p
			break
		}
		u, ok := l.(unwrapper)
		if !ok {
			return e, fmt.Errorf("%T cannot be inspected: it has no PeekEach (use a redisbackend or memory limiter)", l)
		}
		l = u.Unwrap()
	}
	e.Kind = fmt.Sprintf("%T", e.peeker)
	e.reset, _ = e.peeker.(Resetter)
	if d, ok := e.peeker.(interface {
		DeniedKeys(n int) []redisbackend.DeniedKey
	}); ok {
		e.denied = d.DeniedKeys
	}
	if k, ok := e.peeker.(interface{ Keys(string) []string }); ok {
		e.keys = k.Keys
	}
	if k, ok := e.peeker.(interface{ KeyPrefix() string }); ok {
		e.Prefix = k.KeyPrefix()
	}
	specs := e.peeker.Specs()
	if len(specs) == 0 {
		return e, errors.New("the limiter has no specs")
	}
	for i, s := range specs {
		lim, err := s.Core()
		if err != nil {
			return e, fmt.Errorf("spec %d: %w", i, err)
		}
		info := limitInfo{Algorithm: lim.Name(), Desc: describeLimit(lim)}
		if len(names) == len(specs) {
			info.Name = names[i]
		}
		e.Limits = append(e.Limits, info)
	}
	return e, nil
}

// describeLimit says what a limit admits, in words: "burst 10, 1 per 100ms" for the buckets,
// "100 per 1m0s" for the windows.
func describeLimit(l core.Limit) string {
	period := time.Duration(l.Period()) * time.Microsecond
	if a, err := core.Lookup(l.Name()); err == nil && a.Shape == core.Bucket {
		interval := time.Duration(coreops.Ints(l)[0]) * time.Microsecond
		return fmt.Sprintf("burst %d, 1 per %v (full again after %v)", l.Max(), interval, period)
	}
	return fmt.Sprintf("%d per %v", l.Max(), period)
}

// lookup is a parsed key lookup: which limiter, which key, and the cost of the request
// peeked at.
type lookup struct {
	Limiter string // "" when the form was not submitted
	Select  string // the limiter preselected in the form (l without a key)
	Key     string // the key, raw bytes
	Enc     string // "text" or "hex": how the key is written in the form
	N       int64
}

// maxCost bounds the cost parameter; the limiter itself rejects a cost above its limit.
const maxCost = core.MaxCount

// parseLookup parses the query of the limits page: l (a limiter name), key, enc ("text",
// the default, or "hex" for binary keys) and n (the cost, default 1). A query without key
// is the page without a lookup. Errors say which parameter is wrong.
func parseLookup(q url.Values) (lookup, error) {
	lk := lookup{Enc: "text", N: 1}
	name, raw := q.Get("l"), q.Get("key")
	if len(name) > maxParam {
		return lk, fmt.Errorf("parameter \"l\" longer than %d bytes", maxParam)
	}
	switch enc := q.Get("enc"); enc {
	case "", "text":
	case "hex":
		lk.Enc = "hex"
	default:
		return lk, fmt.Errorf("parameter \"enc\": %q is neither text nor hex", cutDisplay(enc, 32))
	}
	if s := q.Get("n"); s != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 1 || n > maxCost {
			return lk, fmt.Errorf("parameter \"n\": %q is not a cost in 1..%d", cutDisplay(s, 32), maxCost)
		}
		lk.N = n
	}
	if raw == "" {
		lk.Select = name
		return lk, nil
	}
	if name == "" {
		return lk, errors.New("missing parameter \"l\": which limiter")
	}
	lk.Limiter = name
	key := raw
	if lk.Enc == "hex" {
		if len(raw) > 4*MaxKeyBytes { // hex digits and some white space

			return lk, fmt.Errorf("parameter \"key\": longer than %d bytes", MaxKeyBytes)
		}
		clean := strings.Map(func(r rune) rune {
			if unicode.IsSpace(r) {
				return -1
			}
			return r
		}, raw)
		b, err := hex.DecodeString(clean)
		if err != nil {
			return lk, fmt.Errorf("parameter \"key\": not hexadecimal (%v)", err)
		}
		key = string(b)
	}
	if len(key) > MaxKeyBytes {
		return lk, fmt.Errorf("parameter \"key\": %d bytes, longer than %d", len(key), MaxKeyBytes)
	}
	if key == "" {
		return lk, errors.New("parameter \"key\": empty")
	}
	lk.Key = key
	// A key that is not printable text goes back into the form as hex, where it survives.
	if lk.Enc == "text" && !printable(key) {
		lk.Enc = "hex"
	}
	return lk, nil
}

// formKey returns the key as the form writes it under lk.Enc.
func (lk lookup) formKey() string {
	if lk.Enc == "hex" {
		return hex.EncodeToString([]byte(lk.Key))
	}
	return lk.Key
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// cutDisplay returns s for display: quoted with escapes when it is not printable text,
// and cut to about n bytes with the number of bytes left out.
func cutDisplay(s string, n int) string {
	cut := 0
	if len(s) > n {
		cut = len(s) - n
		s = s[:n]
		for len(s) > 0 && !utf8.ValidString(s) && len(s) > n-4 {
			s = s[:len(s)-1]
			cut++
		}
	}
	if !printable(s) {
		s = strconv.QuoteToASCII(s)
	}
	if cut > 0 {
		s += fmt.Sprintf(" … (%d more bytes)", cut)
	}
	return s
}

// limitState is one limit's row of a lookup.
type limitState struct {
	limitInfo
	Limit      int64
	Available  int64 // cost the key admits now, before the request
	Allowed    bool
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
	Delay      time.Duration
	ResetAt    time.Time
}

// limitsPage is the data of the limits page.
type limitsPage struct {
	Limiters  []limiterEntry
	Denied    []deniedList // per limiter that keeps local denials: its most denied keys
	Lookup    lookup
	Selected  string // the limiter selected in the form
	FormKey   string
	KeyShown  string // the key for display: escaped and cut
	KeyLen    int
	RedisKeys []string
	// NoState is set when none of the key's Redis keys exists (read with EXISTS through the
	// console's client): the decisions shown are a new key's. StateUnknown when that read
	// failed.
	NoState, StateUnknown bool
	Entry                 *limiterEntry
	States                []limitState
	Combined              *limitState // the request's decision when there are several limits
	At                    time.Time
	Notice                string
	CanReset              bool
}

func (c *Console) pageLimits(w http.ResponseWriter, r *http.Request) {
	lk, err := parseLookup(r.URL.Query())
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	notice := ""
	if r.URL.Query().Get("done") == "reset" && lk.Limiter != "" {
		notice = noticeReset
	}
	c.renderLimits(w, r, http.StatusOK, lk, notice)
}

// renderLimits renders the limits page, with the lookup lk when it names a limiter.
func (c *Console) renderLimits(w http.ResponseWriter, r *http.Request, status int, lk lookup, notice string) {
	p := limitsPage{Limiters: c.limiters, Lookup: lk, FormKey: lk.formKey(), Notice: notice, Denied: c.deniedLists()}
	p.Selected = lk.Limiter
	if p.Selected == "" && c.limiter(lk.Select) != nil {
		p.Selected = lk.Select
	}
	if p.Selected == "" && len(c.limiters) > 0 {
		p.Selected = c.limiters[0].Name
	}
	crumbs := []crumb{{"topics", c.link("/")}, {"limits", c.link("/limits")}}
	if lk.Limiter != "" {
		e := c.limiter(lk.Limiter)
		if e == nil {
			c.fail(w, r, http.StatusNotFound, fmt.Sprintf("no limiter %q is configured", cutDisplay(lk.Limiter, 200)))
			return
		}
		p.Entry = e
		p.KeyShown, p.KeyLen = cutDisplay(lk.Key, 256), len(lk.Key)
		if e.keys != nil {
			for _, k := range e.keys(lk.Key) {
				p.RedisKeys = append(p.RedisKeys, cutDisplay(k, 300))
			}
		}
		ctx, cancel := c.call(r.Context())
		ds, err := e.peeker.PeekEach(ctx, lk.Key, time.Time{}, lk.N)
		if err == nil && e.keys != nil {
			p.NoState, p.StateUnknown = c.noState(ctx, e.keys(lk.Key))
		}
		cancel()
		p.At = time.Now()
		switch {
		case errors.Is(err, redstream.ErrCostTooLarge) || errors.Is(err, redstream.ErrInvalidCost) || errors.Is(err, redstream.ErrEmptyKey):
			c.fail(w, r, http.StatusBadRequest, err.Error())
			return
		case err != nil:
			c.redisFail(w, r, "look up the key", err)
			return
		case len(ds) != len(e.Limits):
			c.redisFail(w, r, "look up the key", fmt.Errorf("%d decisions for %d limits", len(ds), len(e.Limits)))
			return
		}
		cds := make([]core.Decision, len(ds))
		for i, d := range ds {
			p.States = append(p.States, stateOf(e.Limits[i], d, lk.N, p.At))
			cds[i] = core.Decision{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
				RetryAfter: d.RetryAfter.Microseconds(), ResetAfter: d.ResetAfter.Microseconds(), Delay: d.Delay.Microseconds()}
		}
		if len(ds) > 1 {
			cd := core.Combine(cds)
			s := stateOf(limitInfo{Name: "the request"}, redstream.Decision{Allowed: cd.Allowed, Limit: cd.Limit, Remaining: cd.Remaining,
				RetryAfter: time.Duration(cd.RetryAfter) * time.Microsecond, ResetAfter: time.Duration(cd.ResetAfter) * time.Microsecond,
				Delay: time.Duration(cd.Delay) * time.Microsecond}, lk.N, p.At)
			s.Available = p.States[0].Available
			for _, st := range p.States[1:] {
				s.Available = min(s.Available, st.Available)
			}
			p.Combined = &s
		}
		p.CanReset = e.reset != nil && !c.readOnly
		crumbs = append(crumbs, crumb{lk.Limiter, buildLink(c.prefix, "/limits", "l", lk.Limiter)})
	}
	c.render(w, r, status, "limits.html", crumbs, p)
}

// noState reports whether none of keys exists, and whether that could not be read.
func (c *Console) noState(ctx context.Context, keys []string) (none, unknown bool) {
	if len(keys) == 0 {
		return false, false
	}
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.client.B().Exists().Key(k).Build()
	}
	for _, r := range c.client.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return false, true
		}
		if n > 0 {
			return false, false
		}
	}
	return true, false
}

// stateOf turns a limit's peeked decision for a request of cost n into its row.
// Available is what the key admits before the request: Remaining is after an admitted
// request, so it is Remaining + n then, and Remaining when denied (a denial consumes
// nothing), exactly, in every algorithm.
func stateOf(info limitInfo, d redstream.Decision, n int64, at time.Time) limitState {
	s := limitState{limitInfo: info, Limit: d.Limit, Allowed: d.Allowed, Remaining: d.Remaining,
		RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter, Delay: d.Delay, Available: d.Remaining}
	if d.Allowed {
		s.Available += n
	}
	s.ResetAt = at.Add(d.ResetAfter)
	return s
}

// limiter returns the configured limiter named name, or nil.
func (c *Console) limiter(name string) *limiterEntry {
	i := sort.Search(len(c.limiters), func(i int) bool { return c.limiters[i].Name >= name })
	if i < len(c.limiters) && c.limiters[i].Name == name {
		return &c.limiters[i]
	}
	return nil
}

// doResetKey forgets a key of a limiter (POST /limits/reset: l, key, enc).
func (c *Console) doResetKey(w http.ResponseWriter, r *http.Request) {
	lk, err := parseLookup(r.PostForm)
	if err == nil && lk.Limiter == "" {
		err = errors.New("missing parameter \"key\"")
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	e := c.limiter(lk.Limiter)
	if e == nil {
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("no limiter %q is configured", cutDisplay(lk.Limiter, 200)))
		return
	}
	if e.reset == nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("limiter %q (%s) cannot reset a key", lk.Limiter, e.Kind))
		return
	}
	ctx, cancel := c.call(r.Context())
	err = e.reset.Reset(ctx, lk.Key)
	cancel()
	if err != nil {
		c.redisFail(w, r, "reset the key", err)
		return
	}
	c.log.Info("console: reset a rate-limit key", "limiter", lk.Limiter, "key", cutDisplay(lk.Key, 256))
	// POST-redirect-GET: the limits page of the key, which now shows its fresh state.
	http.Redirect(w, r, buildLink(c.prefix, "/limits", "l", lk.Limiter, "key", lk.formKey(), "enc", lk.Enc,
		"n", strconv.FormatInt(lk.N, 10), "done", "reset"), http.StatusSeeOther)
}

// noticeReset is the limits page's notice after a reset (done=reset).
const noticeReset = "The key's state was deleted: it is a new key again."

// deniedList is one limiter's most denied keys.
type deniedList struct {
	Limiter string
	Keys    []deniedRow
}

// deniedRow is one key denied from memory, as listed: its text, or its hex bytes when it
// is not printable text (Enc "hex").
type deniedRow struct {
	Key, Enc string
	Shown    string // cut for display
	Denials  int64
	Retry    time.Duration
}

// maxDeniedShown is how many of a limiter's most denied keys the limits page lists.
const maxDeniedShown = 10

// deniedLists returns the most denied keys of every limiter that keeps local denials (a
// read of its process's table: no Redis call).
func (c *Console) deniedLists() []deniedList {
	var out []deniedList
	for _, e := range c.limiters {
		if e.denied == nil {
			continue
		}
		l := deniedList{Limiter: e.Name}
		for _, k := range e.denied(maxDeniedShown) {
			r := deniedRow{Key: k.Key, Enc: "text", Denials: k.Denials, Retry: k.Retry}
			if !utf8.ValidString(k.Key) || strings.ContainsFunc(k.Key, unicode.IsControl) {
				r.Key, r.Enc = hex.EncodeToString([]byte(k.Key)), "hex"
			}
			r.Shown, _ = cutString(r.Key, 120)
			l.Keys = append(l.Keys, r)
		}
		out = append(out, l)
	}
	return out
}
