package httpidem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/idempotency"
)

// DefaultMaxBody is the default of Options.MaxBody, in bytes (1 MiB).
const DefaultMaxBody = 1 << 20

// Options configures a Middleware. Idempotent and Principal are required. The YAML keys are
// those of the struct tags.
type Options struct {
	// Idempotent runs each request's handler at most once per key and stores its response:
	// its Retention is how long a key is remembered, its Lease how long a crashed server
	// holds a key, its Wait whether a retry during the first attempt waits (and gets the
	// stored response) rather than 409, its MaxResult the largest stored response, its
	// FailOpen what happens when Redis fails.
	Idempotent *idempotency.Idempotent `yaml:"-"`
	// Principal returns who is calling (the authenticated user, tenant or API key id): keys
	// are scoped by it, so one client's key never replays another's response. Return a
	// constant only for an API with a single client.
	Principal func(r *http.Request) string `yaml:"-"`
	// Required makes a request without Idempotency-Key (of a method in Methods) a 400
	// problem, as the draft says for an operation documented to require it. Default false:
	// such requests run unprotected.
	Required bool `yaml:"required"`
	// Methods are the methods the key applies to (default POST and PATCH, the draft's
	// non-idempotent methods). Other requests pass through untouched, with or without a key.
	Methods []string `yaml:"methods"`
	// FingerprintHeaders are request header fields that are part of the request's
	// fingerprint besides its method, path, query and body (for example Content-Type, or an
	// account header that changes the operation). Default none.
	FingerprintHeaders []string `yaml:"fingerprint-headers"`
	// MaxBody bounds the request body read for the fingerprint, in bytes (default
	// DefaultMaxBody); a larger body is a 413 problem.
	MaxBody int64 `yaml:"max-body-bytes"`
	// Store reports whether a response with the status code is stored and replayed. Nil
	// stores every response but 5xx: a 4xx is the answer to that request and a retry must
	// see it again, while a 5xx says the server failed to answer, so the key is released and
	// a retry runs the handler again (a handler that answers 5xx after its side effect has
	// taken place must make that side effect idempotent itself, or answer otherwise).
	Store func(status int) bool `yaml:"-"`
	// ProblemType is the "type" of the problem details the middleware answers (a link to
	// the API's documentation of its idempotency keys); empty leaves it out (about:blank).
	ProblemType string `yaml:"problem-type"`
}

// Middleware makes the unsafe methods of an HTTP API idempotent with the Idempotency-Key
// request header (draft-ietf-httpapi-idempotency-key-header). It is safe for concurrent use.
type Middleware struct {
	o       Options
	methods []string
	headers []string
}

// New returns a Middleware, or an error wrapping redstream.ErrInvalidConfig for a nil
// Idempotent or Principal or a negative MaxBody.
func New(o Options) (*Middleware, error) {
	switch {
	case o.Idempotent == nil:
		return nil, fmt.Errorf("httpidem: %w: Options.Idempotent is nil", redstream.ErrInvalidConfig)
	case o.Principal == nil:
		return nil, fmt.Errorf("httpidem: %w: Options.Principal is nil", redstream.ErrInvalidConfig)
	case o.MaxBody < 0:
		return nil, fmt.Errorf("httpidem: %w: Options.MaxBody = %d, want >= 0", redstream.ErrInvalidConfig, o.MaxBody)
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Store == nil {
		o.Store = func(status int) bool { return status < 500 }
	}
	m := &Middleware{o: o, methods: []string{http.MethodPost, http.MethodPatch}}
	if len(o.Methods) > 0 {
		m.methods = nil
		for _, v := range o.Methods {
			m.methods = append(m.methods, strings.ToUpper(v))
		}
	}
	for _, h := range o.FingerprintHeaders {
		m.headers = append(m.headers, http.CanonicalHeaderKey(h))
	}
	slices.Sort(m.headers)
	m.headers = slices.Compact(m.headers)
	return m, nil
}

// Wrap returns next behind the middleware. For a request of one of Options.Methods with an
// Idempotency-Key:
//
//   - the first request with the key (per principal) runs next; its response is buffered,
//     written to the client and, when Options.Store accepts its status, stored;
//   - a repeat with the same fingerprint gets the stored status, header fields and body,
//     byte for byte, without running next;
//   - a repeat while the first runs gets 409 Conflict (with Retry-After: 1), or waits for
//     the stored response when the Idempotent waits;
//   - a repeat with another method, path, query, FingerprintHeaders or body gets 422;
//   - a field that is not one structured-field String of 1 to 255 characters gets 400, as
//     does a missing one when Options.Required; a body over Options.MaxBody gets 413;
//   - when Redis fails and the Idempotent fails closed (its default), 503 with
//     Retry-After: 1; a safe method (GET, HEAD, OPTIONS, TRACE, when listed in Methods)
//     then runs next unprotected, since running it twice is harmless.
//
// Every error is a problem details object (RFC 9457, application/problem+json) with the
// draft's titles. Responses are buffered, so a streamed response reaches the client when
// the handler returns.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !slices.Contains(m.methods, r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	fields := r.Header.Values("Idempotency-Key")
	if len(fields) == 0 {
		if m.o.Required {
			m.problem(w, http.StatusBadRequest, probMissing)
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	key, err := parseKey(strings.Join(fields, ", "))
	if err != nil {
		m.problem(w, http.StatusBadRequest, problem{probInvalid.title, probInvalid.detail + " (" + err.Error() + ")"})
		return
	}
	src := r.Body
	if src == nil {
		src = http.NoBody
	}
	body, err := io.ReadAll(io.LimitReader(src, m.o.MaxBody+1))
	if err != nil {
		m.problem(w, http.StatusBadRequest, problem{"The request body could not be read", err.Error()})
		return
	}
	if int64(len(body)) > m.o.MaxBody {
		m.problem(w, http.StatusRequestEntityTooLarge, problem{"The request body is too large",
			"A request with an Idempotency-Key has a body of at most " + strconv.FormatInt(m.o.MaxBody, 10) + " bytes."})
		return
	}
	_ = src.Close()
	withBody := func(ctx context.Context) *http.Request {
		r2 := r.WithContext(ctx)
		r2.Body = io.NopCloser(bytes.NewReader(body))
		return r2
	}
	var rec *recorder
	res, err := m.o.Idempotent.Do(r.Context(), scope(m.o.Principal(r), key), m.fingerprint(r, body), func(ctx context.Context) ([]byte, error) {
		rec = newRecorder()
		next.ServeHTTP(rec, withBody(ctx))
		resp := rec.result()
		if !m.o.Store(resp.status) {
			return nil, errNotStored
		}
		return resp.encode(), nil
	})
	if rec != nil { // the handler ran here: its own response, whatever became of storing it
		rec.result().writeTo(w)
		return
	}
	switch {
	case err == nil:
		resp, derr := decode(res.Value)
		if derr != nil {
			m.problem(w, http.StatusInternalServerError, problem{"The stored response is unreadable", derr.Error()})
			return
		}
		resp.writeTo(w)
	case errors.Is(err, idempotency.ErrInFlight):
		w.Header().Set("Retry-After", "1")
		m.problem(w, http.StatusConflict, probInFlight)
	case errors.Is(err, idempotency.ErrMismatch):
		m.problem(w, http.StatusUnprocessableEntity, probReused)
	case errors.Is(err, idempotency.ErrTooLarge):
		m.problem(w, http.StatusInternalServerError, probTooLarge)
	case safe(r.Method):
		next.ServeHTTP(w, withBody(r.Context()))
	default:
		w.Header().Set("Retry-After", "1")
		m.problem(w, http.StatusServiceUnavailable, probUnavailable)
	}
}

// errNotStored releases the key of a response Options.Store refused.
var errNotStored = errors.New("httpidem: response not stored")

// safe reports whether method is safe (RFC 9110 section 9.2.1).
func safe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// scope returns the key of principal's key: length-prefixed, so no principal and key make
// the key of another pair.
func scope(principal, key string) string {
	return strconv.Itoa(len(principal)) + ":" + principal + ":" + key
}

// fingerprint is the SHA-256 of the method, the path and query, the chosen header fields
// and the body, each length-prefixed.
func (m *Middleware) fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	put := func(s string) {
		h.Write(binary.AppendUvarint(n[:0], uint64(len(s))))
		io.WriteString(h, s)
	}
	put(r.Method)
	put(r.URL.EscapedPath())
	put(r.URL.RawQuery)
	for _, k := range m.headers {
		vs := r.Header.Values(k)
		put(k)
		put(strconv.Itoa(len(vs)))
		for _, v := range vs {
			put(v)
		}
	}
	h.Write(binary.AppendUvarint(n[:0], uint64(len(body))))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// problem is the title and detail of a problem details object.
type problem struct{ title, detail string }

// The draft's problems (section 2.7 of -07), and the middleware's own.
var (
	probMissing = problem{"Idempotency-Key is missing",
		"This operation is idempotent and it requires correct usage of Idempotency Key."}
	probInvalid = problem{"Idempotency-Key is invalid",
		"The Idempotency-Key header field must be one structured-field String of 1 to 255 printable ASCII characters."}
	probInFlight = problem{"A request is outstanding for this Idempotency-Key",
		"A request with the same Idempotency-Key for the same operation is being processed or is outstanding."}
	probReused = problem{"Idempotency-Key is already used",
		"This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation."}
	probTooLarge = problem{"The stored response is too large",
		"The response to the first request with this Idempotency-Key was too large to store, so it cannot be replayed."}
	probUnavailable = problem{"Idempotency cannot be guaranteed now",
		"The store of idempotency keys is unavailable; retry the request later with the same Idempotency-Key."}
)

// problem writes an RFC 9457 problem details response.
func (m *Middleware) problem(w http.ResponseWriter, status int, p problem) {
	v := struct {
		Type   string `json:"type,omitempty"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{m.o.ProblemType, p.title, status, p.detail}
	b, _ := json.Marshal(v)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Language", "en")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// sortedKeys returns the keys of h, sorted.
func sortedKeys(h http.Header) []string {
	ks := make([]string, 0, len(h))
	for k := range h {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
