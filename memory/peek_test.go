package memory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
)

var peekSpecs = map[string][]redstream.Spec{
	"token-bucket":    {redstream.TokenBucket(5, 10)},
	"leaky-bucket":    {redstream.LeakyBucket(4, 5)},
	"sliding":         {redstream.SlidingWindow(200*time.Millisecond, 5)},
	"sliding-counter": {redstream.SlidingCounter(200*time.Millisecond, 6)},
	"fixed":           {redstream.FixedWindow(200*time.Millisecond, 4)},
	"multi":           {redstream.TokenBucket(3, 10), redstream.SlidingWindow(time.Second, 8), redstream.FixedWindow(time.Second, 7)},
}

// TestPeekIsTheNextDecision: for the five algorithms (the buckets on their lock-free
// table, the others on the locked one) and a multi-limiter, short and long keys, at times
// going forward, standing still and going back: two peeks answer the same, the peek is the
// decision AllowN then returns, a twin key never peeked at gets the same decisions, and a
// peek of a new key tracks nothing.
func TestPeekIsTheNextDecision(t *testing.T) {
	ctx := context.Background()
	for name, specs := range peekSpecs {
		for _, key := range []string{"short", "a key longer than fifteen bytes"} {
			t.Run(name+"/"+fmt.Sprint(len(key)), func(t *testing.T) {
				l, err := NewMultiLimiter(specs, Options{})
				if err != nil {
					t.Fatal(err)
				}
				twinKey := key + "'"
				rng := rand.New(rand.NewPCG(2, uint64(len(name))))
				now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				admitted, denied := 0, 0
				for step := 0; step < 300; step++ {
					switch r := rng.IntN(10); {
					case r < 6:
						now = now.Add(time.Duration(rng.IntN(150)) * time.Millisecond)
					case r < 8:
					default:
						now = now.Add(-time.Duration(rng.IntN(30)) * time.Millisecond)
					}
					n := 1 + rng.Int64N(3)
					if _, err := l.PeekN(ctx, key, now.Add(time.Duration(rng.IntN(500))*time.Millisecond), 1); err != nil {
						t.Fatal(err)
					}
					p1, err1 := l.PeekN(ctx, key, now, n)
					p2, err2 := l.PeekN(ctx, key, now, n)
					if err1 != nil || err2 != nil || p1 != p2 {
						t.Fatalf("step %d: peeks %+v (%v), %+v (%v)", step, p1, err1, p2, err2)
					}
					each, err := l.PeekEach(ctx, key, now, n)
					if err != nil || len(each) != len(specs) {
						t.Fatalf("step %d: PeekEach = %v, %v", step, each, err)
					}
					d, err := l.AllowN(ctx, key, now, n)
					if err != nil || d != p1 {
						t.Fatalf("step %d: AllowN = %+v, %v; the peek said %+v", step, d, err, p1)
					}
					if twin, err := l.AllowN(ctx, twinKey, now, n); err != nil || twin != d {
						t.Fatalf("step %d: twin = %+v, %v; want %+v", step, twin, err, d)
					}
					if d.Allowed {
						admitted++
					} else {
						denied++
					}
				}
				if admitted == 0 || denied == 0 {
					t.Fatalf("%d admitted, %d denied", admitted, denied)
				}
				tracked := l.TrackedKeys()
				if d, err := l.PeekN(ctx, "new key", now, 1); err != nil || !d.Allowed {
					t.Fatalf("peek of a new key = %+v, %v", d, err)
				}
				if got := l.TrackedKeys(); got != tracked {
					t.Fatalf("a peek of a new key changed TrackedKeys from %d to %d", tracked, got)
				}
			})
		}
	}
}

// TestPeekBadInput: a peek reports AllowN's errors.
func TestPeekBadInput(t *testing.T) {
	ctx := context.Background()
	for name, specs := range peekSpecs {
		l, err := NewMultiLimiter(specs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			key  string
			now  time.Time
			n    int64
			want error
		}{
			{"", time.Time{}, 1, redstream.ErrEmptyKey},
			{"k", time.Time{}, 0, redstream.ErrInvalidCost},
			{"k", time.Time{}, 1000, redstream.ErrCostTooLarge},
			{"k", time.Unix(-5, 0), 1, redstream.ErrInvalidTime},
		} {
			_, err := l.PeekN(ctx, tt.key, tt.now, tt.n)
			_, err2 := l.PeekEach(ctx, tt.key, tt.now, tt.n)
			if !errors.Is(err, tt.want) || !errors.Is(err2, tt.want) {
				t.Errorf("%s: key %q n %d: %v / %v, want %v", name, tt.key, tt.n, err, err2, tt.want)
			}
		}
	}
}

// TestPeekHammer: peeks racing decisions and sweeps (a threshold of 8 keys rebuilds the
// tables often) never see a torn state: every peek is a valid decision, and the decisions
// are those of a limiter nobody peeked at. Run with -race.
func TestPeekHammer(t *testing.T) {
	ctx := context.Background()
	for name, specs := range peekSpecs {
		t.Run(name, func(t *testing.T) {
			l, err := NewMultiLimiter(specs, Options{SweepThreshold: 8, Shards: 2})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			errs := make(chan error, 4)
			for g := 0; g < 3; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						d, err := l.PeekN(ctx, fmt.Sprintf("k%d", i%40), time.Time{}, 1)
						if err != nil || d.Limit <= 0 || d.Remaining < 0 || d.Remaining > d.Limit {
							errs <- fmt.Errorf("peek: %+v, %v", d, err)
							return
						}
					}
				}()
			}
			for i := 0; i < 20000; i++ {
				if _, err := l.AllowN(ctx, fmt.Sprintf("k%d", i%40), time.Time{}, 1); err != nil {
					t.Fatal(err)
				}
			}
			close(stop)
			wg.Wait()
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
		})
	}
}
