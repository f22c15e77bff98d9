package sink_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/sink"
)

// fakeLimiter returns its fields as the answer to every call.
type fakeLimiter struct {
	d   redstream.Decision
	err error
}

func (f *fakeLimiter) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return f.d, f.err
}

// collect is a Sink that records what it receives.
type collect struct {
	mu   sync.Mutex
	got  []string
	fail error
}

func (c *collect) Invoke(_ context.Context, v string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.got = append(c.got, v)
	return nil
}

// keyRecorder is a limiter that admits every key but records the keys it was asked for.
type keyRecorder struct {
	fakeLimiter
	keys []string
}

func (k *keyRecorder) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	k.keys = append(k.keys, key)
	return redstream.Decision{Allowed: true}, nil
}

func TestLimitingSinkPolicies(t *testing.T) {
	ctx := context.Background()
	newLimiter := func(t *testing.T) redstream.Limiter {
		t.Helper()
		l, err := memory.NewLimiter(redstream.FixedWindow(time.Hour, 2), memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("drop", func(t *testing.T) {
		next := &collect{}
		s, err := sink.NewLimiting(newLimiter(t), func(string) string { return "user:1" }, next, sink.DenyDrop)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"m1", "m2", "m3", "m4"} {
			if err := s.Invoke(ctx, v); err != nil {
				t.Errorf("Invoke(%s) = %v, want nil (dropped silently)", v, err)
			}
		}
		if len(next.got) != 2 || s.Dropped() != 2 {
			t.Errorf("delivered %v, dropped %d; want 2 and 2", next.got, s.Dropped())
		}
	})
	t.Run("throw", func(t *testing.T) {
		next := &collect{}
		s, _ := sink.NewLimiting(newLimiter(t), func(string) string { return "user:1" }, next, sink.DenyThrow)
		s.Invoke(ctx, "m1")
		s.Invoke(ctx, "m2")
		err := s.Invoke(ctx, "m3")
		if !errors.Is(err, sink.ErrRateLimited) {
			t.Fatalf("third Invoke = %v, want ErrRateLimited", err)
		}
		var rl *sink.RateLimitedError
		if !errors.As(err, &rl) || rl.Key != "user:1" {
			t.Fatalf("error %v is not a *RateLimitedError for user:1", err)
		}
		if d := rl.Decision; d.Allowed || d.RetryAfter <= 0 {
			t.Errorf("RateLimitedError.Decision = %+v, want a denied decision with RetryAfter", d)
		}
		if len(next.got) != 2 || s.Dropped() != 0 {
			t.Errorf("delivered %v, dropped %d", next.got, s.Dropped())
		}
	})
	t.Run("per-key limits", func(t *testing.T) {
		next := &collect{}
		s, _ := sink.NewLimiting(newLimiter(t), func(v string) string { return v[:1] }, next, sink.DenyThrow)
		for _, v := range []string{"a1", "a2", "b1", "b2"} {
			if err := s.Invoke(ctx, v); err != nil {
				t.Errorf("Invoke(%s) = %v", v, err)
			}
		}
	})
}

func TestLimitingSinkNullKey(t *testing.T) {
	rec := &keyRecorder{}
	s, _ := sink.NewLimiting(rec, func(string) string { return "" }, &collect{}, sink.DenyDrop)
	if err := s.Invoke(context.Background(), "v"); err != nil {
		t.Fatal(err)
	}
	if len(rec.keys) != 1 || rec.keys[0] != "null" {
		t.Errorf("limiter asked for %q, want the Java starter's \"null\"", rec.keys)
	}
}

func TestLimitingSinkErrors(t *testing.T) {
	ctx := context.Background()
	down := errors.New("redis down")
	s, _ := sink.NewLimiting(&fakeLimiter{err: down}, func(string) string { return "k" }, &collect{}, sink.DenyDrop)
	if err := s.Invoke(ctx, "v"); !errors.Is(err, down) {
		t.Errorf("limiter error = %v, want it returned (wrapped)", err)
	}
	full := errors.New("disk full")
	s, _ = sink.NewLimiting(&fakeLimiter{d: redstream.Decision{Allowed: true}}, func(string) string { return "k" }, &collect{fail: full}, sink.DenyThrow)
	if err := s.Invoke(ctx, "v"); !errors.Is(err, full) {
		t.Errorf("next sink error = %v, want it returned", err)
	}
	// A fail-open limiter admits: the value is delivered despite the backend error.
	open, err := redstream.WithFailurePolicy(&fakeLimiter{err: down}, redstream.FailOpen, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := &collect{}
	s, _ = sink.NewLimiting(open, func(string) string { return "k" }, next, sink.DenyThrow)
	if err := s.Invoke(ctx, "v"); err != nil || len(next.got) != 1 {
		t.Errorf("fail-open: %v, delivered %v", err, next.got)
	}
}

func TestNewLimitingSinkBadInput(t *testing.T) {
	l := &fakeLimiter{}
	key := func(string) string { return "k" }
	next := &collect{}
	tests := []struct {
		name string
		f    func() error
	}{
		{"nil limiter", func() error { _, err := sink.NewLimiting(nil, key, next, sink.DenyDrop); return err }},
		{"nil key", func() error { _, err := sink.NewLimiting(l, nil, next, sink.DenyDrop); return err }},
		{"nil next", func() error {
			_, err := sink.NewLimiting[string](l, key, nil, sink.DenyDrop)
			return err
		}},
		{"bad policy", func() error { _, err := sink.NewLimiting(l, key, next, 7); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f(); !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("error = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if sink.DenyDrop.String() != "DROP" || sink.DenyThrow.String() != "THROW" {
		t.Errorf("DenyPolicy names = %s, %s", sink.DenyDrop, sink.DenyThrow)
	}
}
