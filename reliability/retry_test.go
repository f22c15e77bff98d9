package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/reliability"
)

func TestPolicyConstructors(t *testing.T) {
	def := reliability.DefaultPolicy()
	if def.MaxAttempts != 3 || def.InitialDelay != 100*time.Millisecond || def.MaxDelay != 10*time.Second ||
		def.Multiplier != 2.0 || !def.Exponential || def.Jitter != core.JitterNone {
		t.Fatalf("DefaultPolicy() = %+v, want the seed defaults", def)
	}
	if got := (reliability.RetryPolicy{}); got.Validate() != nil || got.Attempts() != 1 {
		t.Errorf("RetryPolicy{}: Validate = %v, Attempts = %d, want nil, 1 (the zero policy never retries)", got.Validate(), got.Attempts())
	}
	fd := reliability.FixedDelay(5, 250*time.Millisecond)
	if fd.MaxAttempts != 5 || fd.Exponential || fd.InitialDelay != 250*time.Millisecond {
		t.Errorf("FixedDelay(5, 250ms) = %+v", fd)
	}
	if long := reliability.FixedDelay(1, time.Minute); long.Validate() != nil || long.Delay(1) != time.Minute {
		t.Errorf("FixedDelay(1, 1m): Validate = %v, Delay(1) = %v, want nil, 1m", long.Validate(), long.Delay(1))
	}
	var zero reliability.RetryPolicy
	if err := zero.Validate(); err != nil || zero.Attempts() != 1 {
		t.Errorf("zero RetryPolicy: Validate = %v, Attempts = %d, want nil, 1", err, zero.Attempts())
	}
}

func TestDelay(t *testing.T) {
	def := reliability.DefaultPolicy()
	fixed := reliability.FixedDelay(3, 50*time.Millisecond)
	frac := reliability.DefaultPolicy()
	frac.Multiplier = 1.5
	tests := []struct {
		name    string
		p       reliability.RetryPolicy
		attempt int
		want    time.Duration
	}{
		{"zero attempt", def, 0, 0},
		{"negative attempt", def, -5, 0},
		{"first", def, 1, 100 * time.Millisecond},
		{"second", def, 2, 200 * time.Millisecond},
		{"third", def, 3, 400 * time.Millisecond},
		{"seventh", def, 7, 6400 * time.Millisecond},
		{"capped", def, 8, 10 * time.Second},
		{"no overflow at 100", def, 100, 10 * time.Second},
		{"no overflow at MaxInt", def, math.MaxInt, 10 * time.Second},
		{"fractional multiplier", frac, 3, 225 * time.Millisecond},
		{"fixed first", fixed, 1, 50 * time.Millisecond},
		{"fixed later", fixed, 40, 50 * time.Millisecond},
		{"fixed zero attempt", fixed, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.attempt); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	with := func(f func(*reliability.RetryPolicy)) reliability.RetryPolicy {
		p := reliability.DefaultPolicy()
		f(&p)
		return p
	}
	tests := []struct {
		name  string
		p     reliability.RetryPolicy
		field string
	}{
		{"negative attempts", with(func(p *reliability.RetryPolicy) { p.MaxAttempts = -1 }), "MaxAttempts"},
		{"negative initial", with(func(p *reliability.RetryPolicy) { p.InitialDelay = -time.Second }), "InitialDelay"},
		{"max below initial", with(func(p *reliability.RetryPolicy) { p.InitialDelay = 20 * time.Second }), "MaxDelay"},
		{"multiplier below 1", with(func(p *reliability.RetryPolicy) { p.Multiplier = 0.5 }), "Multiplier"},
		{"multiplier NaN", with(func(p *reliability.RetryPolicy) { p.Multiplier = math.NaN() }), "Multiplier"},
		{"multiplier huge", with(func(p *reliability.RetryPolicy) { p.Multiplier = math.Inf(1) }), "Multiplier"},
		{"bad jitter", with(func(p *reliability.RetryPolicy) { p.Jitter = 9 }), "Jitter"},
		{"nil retryable", with(func(p *reliability.RetryPolicy) { p.Retryable = []reliability.ErrorMatcher{nil} }), "Retryable[0]"},
		{"nil non-retryable", with(func(p *reliability.RetryPolicy) {
			p.NonRetryable = []reliability.ErrorMatcher{reliability.Is(io.EOF), nil}
		}), "NonRetryable[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), "RetryPolicy."+tt.field+" ") {
				t.Errorf("Validate() = %q, want it to name RetryPolicy.%s", err, tt.field)
			}
			if _, err := reliability.NewExecutor(tt.p); err == nil {
				t.Errorf("NewExecutor accepted an invalid policy")
			}
			_ = tt.p.Delay(3) // total even for invalid policies: must not panic
		})
	}
	t.Run("multiplier ignored when not exponential", func(t *testing.T) {
		p := reliability.FixedDelay(2, time.Millisecond)
		p.Multiplier = 0
		if err := p.Validate(); err != nil {
			t.Errorf("Validate() = %v, want nil", err)
		}
	})
}

type tempErr struct{ msg string }

func (e *tempErr) Error() string { return e.msg }

func TestIsRetryable(t *testing.T) {
	errPerm := errors.New("permanent")
	pathErr := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	wrapped := func(err error) error { return fmt.Errorf("outer: %w", fmt.Errorf("middle: %w", err)) }
	only := func(r, nr []reliability.ErrorMatcher) reliability.RetryPolicy {
		p := reliability.DefaultPolicy()
		p.Retryable, p.NonRetryable = r, nr
		return p
	}
	tests := []struct {
		name string
		p    reliability.RetryPolicy
		err  error
		want bool
	}{
		{"nil error", only(nil, nil), nil, false},
		{"neither set retries everything", only(nil, nil), errPerm, true},
		{"retryable Is through wrapping", only([]reliability.ErrorMatcher{reliability.Is(io.EOF)}, nil), wrapped(io.EOF), true},
		{"retryable set, other error", only([]reliability.ErrorMatcher{reliability.Is(io.EOF)}, nil), errPerm, false},
		{"retryable As through wrapping", only([]reliability.ErrorMatcher{reliability.As[*fs.PathError]()}, nil), wrapped(pathErr), true},
		{"As of an interface", only([]reliability.ErrorMatcher{reliability.As[interface {
			error
			Timeout() bool
		}]()}, nil), errPerm, false},
		{"non-retryable", only(nil, []reliability.ErrorMatcher{reliability.Is(errPerm)}), wrapped(errPerm), false},
		{"non-retryable, other error", only(nil, []reliability.ErrorMatcher{reliability.Is(errPerm)}), io.EOF, true},
		{"non-retryable wins", only([]reliability.ErrorMatcher{reliability.As[*tempErr]()}, []reliability.ErrorMatcher{reliability.Is(fs.ErrNotExist)}),
			errors.Join(&tempErr{"t"}, fs.ErrNotExist), false},
		{"non-retryable sees the chain", only(nil, []reliability.ErrorMatcher{reliability.Is(fs.ErrNotExist)}), wrapped(pathErr), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.IsRetryable(tt.err); got != tt.want {
				t.Errorf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// failing returns a function that fails its first n calls with distinct errors, then
// succeeds, and a counter of its calls.
func failing(n int) (func(context.Context) error, *atomic.Int64) {
	var calls atomic.Int64
	return func(context.Context) error {
		c := calls.Add(1)
		if c <= int64(n) {
			return fmt.Errorf("failure %d", c)
		}
		return nil
	}, &calls
}

func quick(retries int) reliability.RetryPolicy {
	p := reliability.DefaultPolicy()
	p.MaxAttempts = retries
	p.InitialDelay, p.MaxDelay = 0, 0
	return p
}

func TestExecutorDo(t *testing.T) {
	errPerm := errors.New("permanent")
	tests := []struct {
		name      string
		p         reliability.RetryPolicy
		failures  int
		wantCalls int64
		wantErr   string
	}{
		{"success first", quick(3), 0, 1, ""},
		{"success after two failures", quick(3), 2, 3, ""},
		{"exhausted returns the last error", quick(3), 100, 4, "failure 4"},
		{"no retry", quick(0), 100, 1, "failure 1"},
		{"one retry", quick(1), 100, 2, "failure 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := reliability.NewExecutor(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			fn, calls := failing(tt.failures)
			err = e.Do(context.Background(), fn)
			if calls.Load() != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls.Load(), tt.wantCalls)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("Do() = %v, want %q", err, tt.wantErr)
			}
		})
	}
	t.Run("non-retryable stops at once", func(t *testing.T) {
		p := quick(5)
		p.NonRetryable = []reliability.ErrorMatcher{reliability.Is(errPerm)}
		e, _ := reliability.NewExecutor(p)
		calls := 0
		err := e.Do(context.Background(), func(context.Context) error {
			calls++
			return fmt.Errorf("wrapped: %w", errPerm)
		})
		if calls != 1 || !errors.Is(err, errPerm) {
			t.Errorf("calls = %d, err = %v; want 1 call and the permanent error", calls, err)
		}
	})
	t.Run("nil function", func(t *testing.T) {
		e, _ := reliability.NewExecutor(quick(1))
		if err := e.Do(context.Background(), nil); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("Do(nil) = %v, want ErrInvalidConfig", err)
		}
	})
}

func TestExecutorWaits(t *testing.T) {
	tests := []struct {
		name   string
		jitter core.Jitter
		rnd    func(int64) int64
		want   []time.Duration
	}{
		{"exponential capped", core.JitterNone, nil, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}},
		{"full jitter at the top", core.JitterFull, func(n int64) int64 { return n - 1 }, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}},
		{"full jitter at the bottom", core.JitterFull, func(int64) int64 { return 0 }, []time.Duration{0, 0, 0, 0}},
		{"equal jitter at the bottom", core.JitterEqual, func(int64) int64 { return 0 }, []time.Duration{500 * time.Microsecond, time.Millisecond, 1500 * time.Microsecond, 1500 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := reliability.RetryPolicy{
				MaxAttempts: 4, InitialDelay: time.Millisecond, MaxDelay: 3 * time.Millisecond,
				Multiplier: 2, Exponential: true, Jitter: tt.jitter, Rand: tt.rnd,
			}
			var got []time.Duration
			var retries []int
			p.OnRetry = func(retry int, err error, wait time.Duration) {
				retries = append(retries, retry)
				got = append(got, wait)
			}
			e, err := reliability.NewExecutor(p)
			if err != nil {
				t.Fatal(err)
			}
			fn, _ := failing(100)
			_ = e.Do(context.Background(), fn)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("waits = %v, want %v", got, tt.want)
			}
			if fmt.Sprint(retries) != "[1 2 3 4]" {
				t.Errorf("OnRetry retry numbers = %v, want [1 2 3 4]", retries)
			}
		})
	}
}

func TestExecutorContext(t *testing.T) {
	slow := reliability.FixedDelay(5, time.Hour) // a wait that would hang the test if not cut short
	t.Run("cancel during the wait", func(t *testing.T) {
		e, _ := reliability.NewExecutor(slow)
		ctx, cancel := context.WithCancel(context.Background())
		last := errors.New("boom")
		calls := 0
		err := e.Do(ctx, func(context.Context) error {
			calls++
			cancel()
			return last
		})
		if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, last) {
			t.Errorf("calls = %d, err = %v; want 1 call and an error wrapping context.Canceled and the last error", calls, err)
		}
	})
	t.Run("deadline during the wait", func(t *testing.T) {
		e, _ := reliability.NewExecutor(slow)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		err := e.Do(ctx, func(context.Context) error { return io.ErrUnexpectedEOF })
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Do() = %v, want DeadlineExceeded and the last error", err)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		e, _ := reliability.NewExecutor(slow)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		err := e.Do(ctx, func(context.Context) error { called = true; return nil })
		if called || !errors.Is(err, context.Canceled) {
			t.Errorf("called = %v, err = %v; want no call and context.Canceled", called, err)
		}
	})
}

func TestCall(t *testing.T) {
	e, _ := reliability.NewExecutor(quick(2))
	n := 0
	got, err := reliability.Call(context.Background(), e, func(context.Context) (string, error) {
		n++
		if n < 3 {
			return "partial", errors.New("not yet")
		}
		return "success", nil
	})
	if got != "success" || err != nil || n != 3 {
		t.Errorf("Call() = %q, %v after %d calls; want success, nil after 3", got, err, n)
	}
	got, err = reliability.Call(context.Background(), e, func(context.Context) (string, error) { return "partial", io.EOF })
	if got != "" || !errors.Is(err, io.EOF) {
		t.Errorf("failing Call() = %q, %v; want the zero value and io.EOF", got, err)
	}
	if _, err := reliability.Call[int](context.Background(), e, nil); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("Call(nil fn) = %v, want ErrInvalidConfig", err)
	}
	if _, err := reliability.Call(context.Background(), nil, func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("Call(nil executor) = %v, want ErrInvalidConfig", err)
	}
}

func TestExecutorConcurrent(t *testing.T) {
	p := reliability.DefaultPolicy()
	p.InitialDelay, p.MaxDelay, p.Jitter = time.Microsecond, 10*time.Microsecond, core.JitterDecorrelated
	e, err := reliability.NewExecutor(p)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 50 {
				fn, calls := failing(2)
				if err := e.Do(context.Background(), fn); err != nil {
					t.Errorf("Do() = %v", err)
				}
				total.Add(calls.Load())
			}
		})
	}
	wg.Wait()
	if total.Load() != 8*50*3 {
		t.Errorf("total calls = %d, want %d", total.Load(), 8*50*3)
	}
}
