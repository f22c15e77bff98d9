package metrics_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
)

// fakeLimiter returns its fields as the answer to every call. It allocates nothing.
type fakeLimiter struct {
	d   redstream.Decision
	err error
}

func (f *fakeLimiter) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return f.d, f.err
}

func counter(t testing.TB, family, name string) uint64 {
	t.Helper()
	return metrics.RateLimit.GetOrCreateCounter(metrics.Name(family, "name", name)).Get()
}

func TestNamedCounts(t *testing.T) {
	tests := []struct {
		name                   string
		fake                   fakeLimiter
		allowed, denied, errCt uint64
	}{
		{"allowed", fakeLimiter{d: redstream.Decision{Allowed: true}}, 1, 0, 0},
		{"denied", fakeLimiter{d: redstream.Decision{RetryAfter: time.Second}}, 0, 1, 0},
		{"error", fakeLimiter{err: errors.New("redis down")}, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "named-test-" + tt.name
			n, err := metrics.Named(name, &tt.fake)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			n.AllowN(ctx, "k", time.Time{}, 1)
			n.AllowN(ctx, "k", time.UnixMilli(1), 1)
			n.AllowN(ctx, "k", time.Time{}, 2)
			for family, want := range map[string]uint64{
				"redis_streaming_rl_allowed_total": 3 * tt.allowed,
				"redis_streaming_rl_denied_total":  3 * tt.denied,
				"redis_streaming_rl_errors_total":  3 * tt.errCt,
			} {
				if got := counter(t, family, name); got != want {
					t.Errorf("%s{name=%q} = %d, want %d", family, name, got, want)
				}
			}
			if n.Name() != name || n.Unwrap() != &tt.fake {
				t.Errorf("Name() = %q, Unwrap() = %v", n.Name(), n.Unwrap())
			}
		})
	}
}

func TestNamedBadInput(t *testing.T) {
	if _, err := metrics.Named("", &fakeLimiter{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("Named(\"\") error = %v, want ErrInvalidConfig", err)
	}
	if _, err := metrics.Named("x", nil); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("Named(nil limiter) error = %v, want ErrInvalidConfig", err)
	}
}

func TestNamedAllocs(t *testing.T) {
	n, _ := metrics.Named("named-allocs", &fakeLimiter{d: redstream.Decision{Allowed: true}})
	ctx := context.Background()
	if a := testing.AllocsPerRun(1000, func() { n.AllowN(ctx, "k", time.Time{}, 1) }); a != 0 {
		t.Errorf("Named.Allow allocates %v per call, want 0", a)
	}
	mem, err := memory.NewLimiter(redstream.TokenBucket(1e9, 1e6), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nm, _ := metrics.Named("named-allocs-memory", mem)
	nm.AllowN(ctx, "hot", time.Time{}, 1) // track the key first
	if a := testing.AllocsPerRun(1000, func() { nm.AllowN(ctx, "hot", time.Time{}, 1) }); a != 0 {
		t.Errorf("Named(memory).Allow allocates %v per call on a known key, want 0", a)
	}
}

func TestNamedEscapesName(t *testing.T) {
	name := `we"ird\name` + "\n"
	n, err := metrics.Named(name, &fakeLimiter{d: redstream.Decision{Allowed: true}})
	if err != nil {
		t.Fatal(err)
	}
	n.AllowN(context.Background(), "k", time.Time{}, 1)
	var b strings.Builder
	metrics.WritePrometheus(&b)
	want := `redis_streaming_rl_allowed_total{name="we\"ird\\name\n"} 1`
	if !strings.Contains(b.String(), want) {
		t.Errorf("exposition lacks %s", want)
	}
}

func TestNamedMemoryEndToEnd(t *testing.T) {
	mem, err := memory.NewLimiter(redstream.SlidingWindow(time.Second, 5), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := metrics.Named("named-e2e", mem)
	now := time.Unix(1_700_000_000, 0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				n.AllowN(context.Background(), "user:1", now, 1)
			}
		})
	}
	wg.Wait()
	if a, d := counter(t, "redis_streaming_rl_allowed_total", "named-e2e"), counter(t, "redis_streaming_rl_denied_total", "named-e2e"); a != 5 || d != 35 {
		t.Errorf("allowed, denied = %d, %d; want 5, 35", a, d)
	}
}

// BenchmarkNamedBaseline calls a limiter that does nothing; BenchmarkNamed wraps the same
// limiter, so the difference is Named's overhead per decision.
func BenchmarkNamedBaseline(b *testing.B) {
	var l redstream.Limiter = &fakeLimiter{d: redstream.Decision{Allowed: true}}
	benchLimiter(b, l)
}

func BenchmarkNamed(b *testing.B) {
	n, _ := metrics.Named("bench-named", &fakeLimiter{d: redstream.Decision{Allowed: true}})
	benchLimiter(b, n)
}

func BenchmarkNamedMemoryBaseline(b *testing.B) {
	mem, _ := memory.NewLimiter(redstream.TokenBucket(1e9, 1e6), memory.Options{})
	benchLimiter(b, mem)
}

func BenchmarkNamedMemory(b *testing.B) {
	mem, _ := memory.NewLimiter(redstream.TokenBucket(1e9, 1e6), memory.Options{})
	n, _ := metrics.Named("bench-named-memory", mem)
	benchLimiter(b, n)
}

func benchLimiter(b *testing.B, l redstream.Limiter) {
	b.Helper()
	b.ReportAllocs()
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.AllowN(ctx, "hot", time.Time{}, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.AllowN(ctx, "hot", time.Time{}, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
