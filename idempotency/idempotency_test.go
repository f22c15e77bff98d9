package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// engines builds an Idempotent of each engine with o (a distinct Name per test, so tests
// sharing a server do not share keys).
var engines = []struct {
	name string
	make func(t *testing.T, o Options) *Idempotent
}{
	{"memory", func(t *testing.T, o Options) *Idempotent {
		i, err := NewMemory(o)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}},
	{"redis", func(t *testing.T, o Options) *Idempotent {
		i, err := NewRedis(redistest.Client(t), o)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}},
	{"cluster", func(t *testing.T, o Options) *Idempotent {
		i, err := NewRedis(redistest.ClusterClient(t), o)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}},
}

// forEngines runs f on every engine.
func forEngines(t *testing.T, o Options, f func(t *testing.T, i *Idempotent)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			o := o
			o.Name = strings.ReplaceAll(t.Name(), "/", "-")
			if o.Timeout == 0 {
				o.Timeout = 2 * time.Second // these tests are of outcomes, on a loaded machine
			}
			f(t, e.make(t, o))
		})
	}
}

func value(v string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(v), nil }
}

func TestDoRunsOnceAndReplays(t *testing.T) {
	forEngines(t, Options{}, func(t *testing.T, i *Idempotent) {
		ctx := context.Background()
		runs := 0
		fn := func(context.Context) ([]byte, error) {
			runs++
			return []byte(fmt.Sprintf("result %d\x00\xff", runs)), nil
		}
		for n := range 3 {
			r, err := i.Do(ctx, "order-1", "fp", fn)
			if err != nil {
				t.Fatalf("call %d: %v", n, err)
			}
			if string(r.Value) != "result 1\x00\xff" || r.Replayed != (n > 0) {
				t.Fatalf("call %d: got %+v, want result 1 replayed=%v", n, r, n > 0)
			}
		}
		if runs != 1 {
			t.Fatalf("fn ran %d times, want 1", runs)
		}
		// Another key is another call; the empty result is stored too.
		r, err := i.Do(ctx, "order-2", "fp", value(""))
		if err != nil || r.Replayed || len(r.Value) != 0 {
			t.Fatalf("order-2: %+v, %v", r, err)
		}
		r, err = i.Do(ctx, "order-2", "fp", value("x"))
		if err != nil || !r.Replayed || len(r.Value) != 0 {
			t.Fatalf("order-2 again: %+v, %v", r, err)
		}
	})
}

func TestDoErrors(t *testing.T) {
	forEngines(t, Options{MaxResult: 4}, func(t *testing.T, i *Idempotent) {
		ctx := context.Background()
		t.Run("empty key", func(t *testing.T) {
			_, err := i.Do(ctx, "", "fp", value("x"))
			if !errors.Is(err, redstream.ErrEmptyKey) {
				t.Fatalf("got %v, want ErrEmptyKey", err)
			}
		})
		t.Run("mismatch", func(t *testing.T) {
			if _, err := i.Do(ctx, "k-mis", "a", value("x")); err != nil {
				t.Fatal(err)
			}
			_, err := i.Do(ctx, "k-mis", "b", value("y"))
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("got %v, want ErrMismatch", err)
			}
		})
		t.Run("in flight", func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan error)
			go func() {
				_, err := i.Do(ctx, "k-fly", "a", func(context.Context) ([]byte, error) {
					close(started)
					<-release
					return []byte("ok"), nil
				})
				done <- err
			}()
			<-started
			if _, err := i.Do(ctx, "k-fly", "a", value("y")); !errors.Is(err, ErrInFlight) {
				t.Errorf("same fingerprint: got %v, want ErrInFlight", err)
			}
			if _, err := i.Do(ctx, "k-fly", "b", value("y")); !errors.Is(err, ErrMismatch) {
				t.Errorf("other fingerprint: got %v, want ErrMismatch", err)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
		t.Run("function error releases", func(t *testing.T) {
			boom := errors.New("boom")
			_, err := i.Do(ctx, "k-err", "a", func(context.Context) ([]byte, error) { return nil, boom })
			if !errors.Is(err, boom) {
				t.Fatalf("got %v, want boom", err)
			}
			r, err := i.Do(ctx, "k-err", "b", value("ok"))
			if err != nil || r.Replayed || string(r.Value) != "ok" {
				t.Fatalf("after a failure: %+v, %v; want a fresh run (any fingerprint)", r, err)
			}
		})
		t.Run("panic releases", func(t *testing.T) {
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("no panic")
					}
				}()
				_, _ = i.Do(ctx, "k-panic", "a", func(context.Context) ([]byte, error) { panic("boom") })
			}()
			r, err := i.Do(ctx, "k-panic", "a", value("ok"))
			if err != nil || r.Replayed {
				t.Fatalf("after a panic: %+v, %v", r, err)
			}
		})
		t.Run("too large", func(t *testing.T) {
			r, err := i.Do(ctx, "k-big", "a", value("12345"))
			if !errors.Is(err, ErrTooLarge) || string(r.Value) != "12345" {
				t.Fatalf("first: %+v, %v; want the value and ErrTooLarge", r, err)
			}
			runs := 0
			_, err = i.Do(ctx, "k-big", "a", func(context.Context) ([]byte, error) { runs++; return nil, nil })
			if !errors.Is(err, ErrTooLarge) || runs != 0 {
				t.Fatalf("replay: %v after %d runs; want ErrTooLarge and no run", err, runs)
			}
			if r, err := i.Do(ctx, "k-fits", "a", value("1234")); err != nil || string(r.Value) != "1234" {
				t.Fatalf("at the bound: %+v, %v", r, err)
			}
		})
	})
}

// TestConcurrentOneKey: 100 concurrent calls with one key run fn once; without Wait the
// others get ErrInFlight (fn holds until they all answered), with Wait the stored result.
func TestConcurrentOneKey(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			forEngines(t, Options{Wait: wait}, func(t *testing.T, i *Idempotent) {
				const n = 100
				var runs, inflight, replays atomic.Int64
				answered := make(chan struct{}, n)
				var wg sync.WaitGroup
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r, err := i.Do(context.Background(), "hot", "fp", func(context.Context) ([]byte, error) {
							runs.Add(1)
							if !wait {
								for range n - 1 {
									<-answered
								}
							} else {
								time.Sleep(50 * time.Millisecond)
							}
							return []byte("paid"), nil
						})
						switch {
						case errors.Is(err, ErrInFlight):
							inflight.Add(1)
						case err != nil:
							t.Error(err)
						case r.Replayed && string(r.Value) == "paid":
							replays.Add(1)
						case r.Replayed:
							t.Errorf("replayed %q", r.Value)
						}
						answered <- struct{}{}
					}()
				}
				wg.Wait()
				if runs.Load() != 1 {
					t.Fatalf("fn ran %d times, want 1", runs.Load())
				}
				if want := int64(n - 1); (!wait && inflight.Load() != want) || (wait && replays.Load() != want) {
					t.Fatalf("in flight %d, replayed %d of %d others", inflight.Load(), replays.Load(), want)
				}
				t.Logf("runs 1, in flight %d, replayed %d", inflight.Load(), replays.Load())
			})
		})
	}
}

// TestLeaseExpiry: a holder that stops renewing (as a crashed process does) keeps the key
// for its lease; after it, the next call runs, and the late holder's result is not stored.
func TestLeaseExpiry(t *testing.T) {
	forEngines(t, Options{Lease: 400 * time.Millisecond}, func(t *testing.T, i *Idempotent) {
		ctx := context.Background()
		rk := i.recordKey("k")
		if rep, err := i.eng.acquire(ctx, rk, "k", "fp", "crashed", i.o.Lease, i.o.Retention); err != nil || rep.code != stAcquired {
			t.Fatalf("acquire: %+v, %v", rep, err)
		}
		if _, err := i.Do(ctx, "k", "fp", value("x")); !errors.Is(err, ErrInFlight) {
			t.Fatalf("within the lease: %v, want ErrInFlight", err)
		}
		time.Sleep(500 * time.Millisecond)
		before := i.m.leaseExpired.Get()
		r, err := i.Do(ctx, "k", "fp", value("second"))
		if err != nil || r.Replayed || string(r.Value) != "second" {
			t.Fatalf("after the lease: %+v, %v", r, err)
		}
		if got := i.m.leaseExpired.Get() - before; got != 1 {
			t.Errorf("lease_expired grew by %d, want 1", got)
		}
		if ok, err := i.eng.complete(ctx, rk, "crashed", []byte("late"), false, time.Minute); err != nil || ok {
			t.Fatalf("late holder's complete: %v, %v; want refused", ok, err)
		}
		if r, err := i.Do(ctx, "k", "fp", value("x")); err != nil || string(r.Value) != "second" {
			t.Fatalf("replay: %+v, %v", r, err)
		}
	})
}

// TestLeaseRenewed: a function running for several leases keeps its key in flight.
func TestLeaseRenewed(t *testing.T) {
	// Renewals every 100 ms keep a 300 ms lease: a stall of the process under 200 ms passes.
	forEngines(t, Options{Lease: 300 * time.Millisecond}, func(t *testing.T, i *Idempotent) {
		ctx := context.Background()
		done := make(chan error)
		started := make(chan struct{})
		go func() {
			_, err := i.Do(ctx, "slow", "fp", func(ctx context.Context) ([]byte, error) {
				close(started)
				time.Sleep(1200 * time.Millisecond)
				return []byte("ok"), context.Cause(ctx)
			})
			done <- err
		}()
		<-started
		for range 6 {
			time.Sleep(150 * time.Millisecond)
			if _, err := i.Do(ctx, "slow", "fp", value("x")); !errors.Is(err, ErrInFlight) {
				t.Fatalf("during a long run: %v, want ErrInFlight", err)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestLeaseLostCancels: a renewal that finds the lease taken cancels fn's context with
// ErrLeaseLost, and Do returns fn's value with ErrLeaseLost.
func TestLeaseLostCancels(t *testing.T) {
	forEngines(t, Options{Lease: 30 * time.Millisecond}, func(t *testing.T, i *Idempotent) {
		ctx := context.Background()
		r, err := i.Do(ctx, "stolen", "fp", func(ctx context.Context) ([]byte, error) {
			// Another holder takes the key, as after an expiry seen by a slow process.
			rk := i.recordKey("stolen")
			if err := i.eng.release(context.Background(), rk, "nobody"); err != nil {
				return nil, err
			}
			switch e := i.eng.(type) {
			case *memEngine:
				e.mu.Lock()
				e.recs[rk].token = "thief"
				e.mu.Unlock()
			case *redisEngine:
				if err := e.c.Do(ctx, e.c.B().Hset().Key(rk).FieldValue().FieldValue("t", "thief").Build()).Error(); err != nil {
					return nil, err
				}
			}
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), ErrLeaseLost) {
				return nil, fmt.Errorf("cause %v", context.Cause(ctx))
			}
			return []byte("done anyway"), nil
		})
		if !errors.Is(err, ErrLeaseLost) || string(r.Value) != "done anyway" {
			t.Fatalf("got %+v, %v; want the value and ErrLeaseLost", r, err)
		}
	})
}

func TestOptionsValidated(t *testing.T) {
	for _, o := range []Options{
		{Retention: -time.Second},
		{Lease: time.Hour, Retention: time.Minute},
		{Lease: time.Millisecond},
		{MaxResult: -1},
		{Name: "a{b}"},
		{KeyPrefix: "p}"},
	} {
		if _, err := NewMemory(o); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("NewMemory(%+v): %v, want ErrInvalidConfig", o, err)
		}
	}
	if _, err := NewRedis(nil, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("NewRedis(nil): %v", err)
	}
	i, err := NewMemory(Options{})
	if err != nil || i.o.Retention != DefaultRetention || i.o.Lease != DefaultLease || i.o.MaxResult != DefaultMaxResult || i.o.Timeout != DefaultTimeout {
		t.Errorf("defaults: %+v, %v", i.o, err)
	}
}

// TestRecordKeyOneSlot: whatever the key, its record key has one hash tag, the digest.
func TestRecordKeyOneSlot(t *testing.T) {
	i, err := NewMemory(Options{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "{x}", "}{", strings.Repeat("z", 10000)} {
		rk := i.recordKey(k)
		open, close := strings.IndexByte(rk, '{'), strings.IndexByte(rk, '}')
		if strings.Count(rk, "{") != 1 || close-open != 65 || !strings.HasPrefix(rk, DefaultKeyPrefix+":n:") {
			t.Errorf("recordKey(%.10q) = %q", k, rk)
		}
	}
}
