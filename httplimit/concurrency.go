package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/failure"
)

// ConcurrencyOptions configures a Concurrency middleware. Limiter and Key are required;
// every other field has a default.
type ConcurrencyOptions struct {
	// Limiter hands out the leases (memory.NewConcurrencyLimiter,
	// redisbackend.NewConcurrencyLimiter): its concurrency spec caps the requests in
	// progress per key, and its lease TTL must outlast the longest request unless
	// ExtendEvery renews the lease.
	Limiter redstream.ConcurrencyLimiter
	// Key returns each request's key, as Options.Key.
	Key KeyFunc
	// ExtendEvery, when positive, renews a request's lease this often while its handler
	// runs (a heartbeat, one goroutine per request), so that a request may outlive the lease
	// TTL; a third of the TTL leaves room for a late renewal. 0 (the default) never renews.
	ExtendEvery time.Duration
	// OnDenied writes the response to a request over the cap, after Retry-After is set.
	// Nil writes "429 Too Many Requests" as text.
	OnDenied func(w http.ResponseWriter, r *http.Request, d redstream.Decision)
	// OnError writes the response when the key function fails or Acquire returns an
	// error, as Options.OnError (400 for ErrKey, 500 for other bad input, 503 for backend
	// errors by default).
	OnError func(w http.ResponseWriter, r *http.Request, err error)
}

// Concurrency caps the requests in progress per key (Stripe's concurrent-requests
// limiter): each request holds a lease of one slot while its handler runs, released when the
// handler returns or panics. A request over the cap is 429 Too Many Requests with
// Retry-After (whole seconds, rounded up, at least 1): the time until the earliest lease
// expires, an upper bound, since a release frees a slot sooner. It writes no RateLimit
// fields: the httpapi draft's quotas are spent over a window, and a cap on requests in
// progress has none. A release that fails (a Redis outage) leaves the slot to its lease's
// expiry. It is safe for concurrent use.
type Concurrency struct {
	o ConcurrencyOptions
}

// NewConcurrency returns the middleware, or an error wrapping redstream.ErrInvalidConfig
// for a nil Limiter or Key or a negative ExtendEvery.
func NewConcurrency(o ConcurrencyOptions) (*Concurrency, error) {
	switch {
	case o.Limiter == nil:
		return nil, fmt.Errorf("httplimit: %w: ConcurrencyOptions.Limiter is nil", redstream.ErrInvalidConfig)
	case o.Key == nil:
		return nil, fmt.Errorf("httplimit: %w: ConcurrencyOptions.Key is nil", redstream.ErrInvalidConfig)
	case o.ExtendEvery < 0:
		return nil, fmt.Errorf("httplimit: %w: ConcurrencyOptions.ExtendEvery = %v, want >= 0", redstream.ErrInvalidConfig, o.ExtendEvery)
	}
	return &Concurrency{o: o}, nil
}

// Wrap returns next behind the cap.
func (m *Concurrency) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Concurrency) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := m.o.Key(r)
	if err == nil && key == "" {
		err = errors.New("empty key")
	}
	if err != nil {
		m.fail(w, r, fmt.Errorf("%w: %w", ErrKey, err), http.StatusBadRequest)
		return
	}
	lease, err := m.o.Limiter.Acquire(r.Context(), key, time.Time{}, 1)
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
	if !lease.Allowed {
		w.Header()[hdrRetryAfter] = []string{strconv.FormatInt(ceilSeconds(lease.RetryAfter, 1), 10)}
		if m.o.OnDenied != nil {
			m.o.OnDenied(w, r, lease.Decision)
			return
		}
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	// The release outlives a cancelled request (a client gone): its own call is bounded by
	// the limiter's timeout.
	ctx := context.WithoutCancel(r.Context())
	stop := m.heartbeat(ctx, lease)
	defer func() {
		stop()
		_, _ = m.o.Limiter.Release(ctx, lease, time.Time{})
	}()
	next.ServeHTTP(w, r)
}

// heartbeat renews lease every ExtendEvery until the returned function is called (which
// waits for the renewing goroutine to end), or until the lease is lost. Without
// ExtendEvery it starts nothing.
func (m *Concurrency) heartbeat(ctx context.Context, lease redstream.Lease) (stop func()) {
	if m.o.ExtendEvery <= 0 {
		return func() {}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(m.o.ExtendEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := m.o.Limiter.Extend(ctx, lease, time.Time{}); errors.Is(err, redstream.ErrLeaseLost) {
					return
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}

func (m *Concurrency) fail(w http.ResponseWriter, r *http.Request, err error, status int) {
	if m.o.OnError != nil {
		m.o.OnError(w, r, err)
		return
	}
	http.Error(w, http.StatusText(status), status)
}
