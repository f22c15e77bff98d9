package redstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

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
		s, err := redstream.NewLimitingSink(newLimiter(t), func(string) string { return "user:1" }, next, redstream.DenyDrop)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"m1", "m2", "m3", "m4"} {
			if err := s.Invoke(ctx, v); err != nil {
				t.Errorf("Invoke(%s) = %v, want nil (dropped silently)", v, err)
			}
		}
		if len(next.got) != 2 || s.Dropped() != 2 || s.Policy() != redstream.DenyDrop {
			t.Errorf("delivered %v, dropped %d; want 2 and 2", next.got, s.Dropped())
		}
	})
	t.Run("throw", func(t *testing.T) {
		next := &collect{}
		s, _ := redstream.NewLimitingSink(newLimiter(t), func(string) string { return "user:1" }, next, redstream.DenyThrow)
		s.Invoke(ctx, "m1")
		s.Invoke(ctx, "m2")
		err := s.Invoke(ctx, "m3")
		if !errors.Is(err, redstream.ErrRateLimited) {
			t.Fatalf("third Invoke = %v, want ErrRateLimited", err)
		}
		d, ok := redstream.IsRateLimited(err)
		if !ok || d.Allowed || d.RetryAfter <= 0 {
			t.Errorf("IsRateLimited = %+v, %v; want a denied decision with RetryAfter", d, ok)
		}
		var rl *redstream.RateLimitedError
		if !errors.As(err, &rl) || rl.Key != "user:1" {
			t.Errorf("error %v is not a *RateLimitedError for user:1", err)
		}
		if len(next.got) != 2 || s.Dropped() != 0 {
			t.Errorf("delivered %v, dropped %d", next.got, s.Dropped())
		}
	})
	t.Run("per-key limits", func(t *testing.T) {
		next := &collect{}
		s, _ := redstream.NewLimitingSink(newLimiter(t), func(v string) string { return v[:1] }, next, redstream.DenyThrow)
		for _, v := range []string{"a1", "a2", "b1", "b2"} {
			if err := s.Invoke(ctx, v); err != nil {
				t.Errorf("Invoke(%s) = %v", v, err)
			}
		}
	})
}

func TestLimitingSinkNullKey(t *testing.T) {
	rec := &keyRecorder{}
	s, _ := redstream.NewLimitingSink(rec, func(string) string { return "" }, &collect{}, redstream.DenyDrop)
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
	s, _ := redstream.NewLimitingSink(&fakeLimiter{err: down}, func(string) string { return "k" }, &collect{}, redstream.DenyDrop)
	if err := s.Invoke(ctx, "v"); !errors.Is(err, down) {
		t.Errorf("limiter error = %v, want it returned (wrapped)", err)
	}
	full := errors.New("disk full")
	s, _ = redstream.NewLimitingSink(&fakeLimiter{d: redstream.Decision{Allowed: true}}, func(string) string { return "k" }, &collect{fail: full}, redstream.DenyThrow)
	if err := s.Invoke(ctx, "v"); !errors.Is(err, full) {
		t.Errorf("next sink error = %v, want it returned", err)
	}
	// A fail-open limiter admits: the value is delivered despite the backend error.
	open, err := redstream.WithFailurePolicy(&fakeLimiter{err: down}, redstream.FailOpen, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := &collect{}
	s, _ = redstream.NewLimitingSink(open, func(string) string { return "k" }, next, redstream.DenyThrow)
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
		{"nil limiter", func() error { _, err := redstream.NewLimitingSink(nil, key, next, redstream.DenyDrop); return err }},
		{"nil key", func() error { _, err := redstream.NewLimitingSink(l, nil, next, redstream.DenyDrop); return err }},
		{"nil next", func() error {
			_, err := redstream.NewLimitingSink[string](l, key, nil, redstream.DenyDrop)
			return err
		}},
		{"bad policy", func() error { _, err := redstream.NewLimitingSink(l, key, next, 7); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f(); !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("error = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if redstream.DenyDrop.String() != "DROP" || redstream.DenyThrow.String() != "THROW" {
		t.Errorf("DenyPolicy names = %s, %s", redstream.DenyDrop, redstream.DenyThrow)
	}
}
