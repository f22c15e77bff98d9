package reliability_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/reliability"
)

func TestFactories(t *testing.T) {
	c := reliability.NewConfig[string]()
	if c.Strategy != reliability.StrategyRetry || c.RetryPolicy == nil || c.RetryPolicy.MaxAttempts != 3 ||
		!c.ContinueOnFailure || c.MaxConsecutiveFailures != 10 || c.DeadLetterQueue != nil {
		t.Errorf("NewConfig() = %+v, want the seed defaults", c)
	}
	d, err := reliability.WithDeadLetterQueue[string](1000)
	if err != nil || d.Strategy != reliability.StrategyDeadLetterQueue || d.DeadLetterQueue.MaxSize() != 1000 || d.Validate() != nil {
		t.Errorf("WithDeadLetterQueue(1000) = %+v, %v", d, err)
	}
	if _, err := reliability.WithDeadLetterQueue[string](0); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("WithDeadLetterQueue(0) error = %v, want ErrInvalidConfig", err)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := reliability.DefaultPolicy()
	bad.MaxAttempts = -2
	with := func(f func(*reliability.Config[int])) reliability.Config[int] {
		c := reliability.NewConfig[int]()
		f(&c)
		return c
	}
	tests := []struct {
		name  string
		c     reliability.Config[int]
		field string
	}{
		{"zero value", reliability.Config[int]{}, "Config.Strategy"},
		{"unknown strategy", with(func(c *reliability.Config[int]) { c.Strategy = 42 }), "Config.Strategy"},
		{"retry without policy", with(func(c *reliability.Config[int]) { c.RetryPolicy = nil }), "Config.RetryPolicy"},
		{"dlq without queue", with(func(c *reliability.Config[int]) { c.Strategy = reliability.StrategyDeadLetterQueue }), "Config.DeadLetterQueue"},
		{"zero max failures", with(func(c *reliability.Config[int]) { c.MaxConsecutiveFailures = 0 }), "Config.MaxConsecutiveFailures"},
		{"invalid retry policy", with(func(c *reliability.Config[int]) { c.RetryPolicy = &bad }), "RetryPolicy.MaxAttempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig naming %s", err, tt.field)
			}
			if _, err := reliability.NewProcessor(tt.c); err == nil {
				t.Errorf("NewProcessor accepted an invalid config")
			}
		})
	}
	t.Run("skip ignores an invalid policy", func(t *testing.T) {
		c := with(func(c *reliability.Config[int]) { c.Strategy = reliability.StrategySkip; c.RetryPolicy = &bad })
		if err := c.Validate(); err != nil {
			t.Errorf("Validate() = %v, want nil (Skip never retries)", err)
		}
	})
}

func TestParseFailureStrategy(t *testing.T) {
	for in, want := range map[string]reliability.FailureStrategy{
		"FAIL_FAST": reliability.StrategyFailFast, "fail-fast": reliability.StrategyFailFast, "failFast": reliability.StrategyFailFast,
		"RETRY": reliability.StrategyRetry, "skip": reliability.StrategySkip, "DEAD_LETTER_QUEUE": reliability.StrategyDeadLetterQueue,
		"dlq": reliability.StrategyDeadLetterQueue, "Ignore": reliability.StrategyIgnore,
	} {
		got, err := reliability.ParseFailureStrategy(in)
		if err != nil || got != want {
			t.Errorf("ParseFailureStrategy(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, _ := reliability.ParseFailureStrategy(got.String()); back != got {
			t.Errorf("String() %q does not parse back", got)
		}
	}
	if _, err := reliability.ParseFailureStrategy("explode"); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("ParseFailureStrategy(explode) error = %v", err)
	}
}

var errBoom = errors.New("boom")

// recorder is a processing function that fails for the elements in fail (always) and counts
// calls per element.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]int // element -> failures before success (-1: always)
}

func newRecorder(fail map[string]int) *recorder {
	return &recorder{calls: map[string]int{}, fail: fail}
}

func (r *recorder) fn(_ context.Context, e string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[e]++
	if f, ok := r.fail[e]; ok && (f < 0 || r.calls[e] <= f) {
		return errBoom
	}
	return nil
}

func quickConfig(s reliability.FailureStrategy, retries int) reliability.Config[string] {
	c := reliability.NewConfig[string]()
	c.Strategy = s
	p := quick(retries)
	c.RetryPolicy = &p
	return c
}

func TestProcessStrategies(t *testing.T) {
	tests := []struct {
		name       string
		strategy   reliability.FailureStrategy
		fail       int // failures before success; -1 always
		wantOut    reliability.Outcome
		wantTries  int
		wantErr    bool
		wantCB     int
		wantRun    int
		wantQueued int
	}{
		{"fail fast fails", reliability.StrategyFailFast, -1, reliability.OutcomeFailed, 1, true, 1, 1, 0},
		{"fail fast succeeds", reliability.StrategyFailFast, 0, reliability.OutcomeSuccess, 1, false, 0, 0, 0},
		{"retry exhausted", reliability.StrategyRetry, -1, reliability.OutcomeFailed, 3, true, 1, 1, 0},
		{"retry recovers", reliability.StrategyRetry, 2, reliability.OutcomeRetried, 3, false, 0, 0, 0},
		{"skip", reliability.StrategySkip, -1, reliability.OutcomeSkipped, 1, false, 1, 1, 0},
		{"skip does not retry", reliability.StrategySkip, 1, reliability.OutcomeSkipped, 1, false, 1, 1, 0},
		{"dead letter after retries", reliability.StrategyDeadLetterQueue, -1, reliability.OutcomeDeadLettered, 3, false, 1, 1, 1},
		{"dead letter recovers", reliability.StrategyDeadLetterQueue, 1, reliability.OutcomeRetried, 2, false, 0, 0, 0},
		{"ignore", reliability.StrategyIgnore, -1, reliability.OutcomeIgnored, 1, false, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := quickConfig(tt.strategy, 2)
			c.DeadLetterQueue, _ = reliability.NewDeadLetterQueue[string](10)
			var cb []reliability.FailedElement[string]
			c.OnFailure = func(fe reliability.FailedElement[string]) { cb = append(cb, fe) }
			p, err := reliability.NewProcessor(c)
			if err != nil {
				t.Fatal(err)
			}
			r := newRecorder(map[string]int{"x": tt.fail})
			res, err := p.Process(context.Background(), "x", r.fn)
			if res.Outcome != tt.wantOut || res.Attempts != tt.wantTries || (err != nil) != tt.wantErr {
				t.Errorf("Process() = %+v, %v; want outcome %v, %d tries, error %v", res, err, tt.wantOut, tt.wantTries, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, errBoom) {
				t.Errorf("error %v does not wrap the function's error", err)
			}
			if r.calls["x"] != tt.wantTries {
				t.Errorf("function ran %d times, want %d", r.calls["x"], tt.wantTries)
			}
			if len(cb) != tt.wantCB {
				t.Errorf("OnFailure called %d times, want %d", len(cb), tt.wantCB)
			}
			if len(cb) > 0 && (cb[0].Element != "x" || cb[0].AttemptCount != tt.wantTries || !errors.Is(cb[0].Err, errBoom)) {
				t.Errorf("OnFailure got %+v", cb[0])
			}
			if got := p.ConsecutiveFailures(); got != tt.wantRun {
				t.Errorf("ConsecutiveFailures() = %d, want %d", got, tt.wantRun)
			}
			if got := c.DeadLetterQueue.Len(); got != tt.wantQueued {
				t.Errorf("dead letters = %d, want %d", got, tt.wantQueued)
			}
			if tt.wantQueued > 0 {
				fe, _ := c.DeadLetterQueue.Peek()
				if fe.AttemptCount != tt.wantTries || fe.Err.Error() != "boom" {
					t.Errorf("dead letter = %+v", fe)
				}
			}
		})
	}
}

func TestProcessStopping(t *testing.T) {
	ctx := context.Background()
	t.Run("fail fast stops the processor", func(t *testing.T) {
		cfg := reliability.NewConfig[string]()
		cfg.Strategy, cfg.ContinueOnFailure = reliability.StrategyFailFast, false
		p, _ := reliability.NewProcessor(cfg)
		r := newRecorder(map[string]int{"bad": -1})
		if _, err := p.Process(ctx, "bad", r.fn); !errors.Is(err, errBoom) {
			t.Fatalf("first failure = %v", err)
		}
		res, err := p.Process(ctx, "good", r.fn)
		if !errors.Is(err, reliability.ErrStopped) || res.Outcome != reliability.OutcomeRejected || r.calls["good"] != 0 || !p.Stopped() {
			t.Errorf("after a fail-fast failure: %+v, %v, calls %d; want ErrStopped without a call", res, err, r.calls["good"])
		}
		p.Reset()
		if _, err := p.Process(ctx, "good", r.fn); err != nil || p.Stopped() {
			t.Errorf("after Reset: %v (stopped %v)", err, p.Stopped())
		}
	})
	t.Run("max consecutive failures", func(t *testing.T) {
		c := quickConfig(reliability.StrategySkip, 0)
		c.MaxConsecutiveFailures = 3
		p, _ := reliability.NewProcessor(c)
		r := newRecorder(map[string]int{"bad": -1})
		for i := range 2 {
			if _, err := p.Process(ctx, "bad", r.fn); err != nil {
				t.Fatalf("failure %d returned %v, want nil (skipped)", i+1, err)
			}
		}
		if _, err := p.Process(ctx, "ok", r.fn); err != nil || p.ConsecutiveFailures() != 0 {
			t.Fatalf("a success must end the run: %v, run %d", err, p.ConsecutiveFailures())
		}
		for i := range 2 {
			if _, err := p.Process(ctx, "bad", r.fn); err != nil {
				t.Fatalf("failure %d returned %v", i+1, err)
			}
		}
		_, err := p.Process(ctx, "bad", r.fn)
		if !errors.Is(err, reliability.ErrTooManyFailures) || !errors.Is(err, errBoom) || !p.Stopped() {
			t.Errorf("third failure in a row = %v (stopped %v), want ErrTooManyFailures wrapping the error", err, p.Stopped())
		}
		if _, err := p.Process(ctx, "ok", r.fn); !errors.Is(err, reliability.ErrStopped) {
			t.Errorf("after too many failures = %v, want ErrStopped", err)
		}
	})
	t.Run("full dead-letter queue", func(t *testing.T) {
		c := quickConfig(reliability.StrategyDeadLetterQueue, 0)
		c.RetryPolicy = nil
		c.DeadLetterQueue, _ = reliability.NewDeadLetterQueue[string](1)
		p, _ := reliability.NewProcessor(c)
		r := newRecorder(map[string]int{"a": -1, "b": -1})
		if res, err := p.Process(ctx, "a", r.fn); err != nil || res.Outcome != reliability.OutcomeDeadLettered || res.Attempts != 1 {
			t.Fatalf("first: %+v, %v", res, err)
		}
		res, err := p.Process(ctx, "b", r.fn)
		if !errors.Is(err, reliability.ErrDeadLetterQueueFull) || !errors.Is(err, errBoom) || res.Outcome != reliability.OutcomeFailed {
			t.Errorf("second: %+v, %v; want ErrDeadLetterQueueFull", res, err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		c := quickConfig(reliability.StrategyDeadLetterQueue, 0)
		c.DeadLetterQueue, _ = reliability.NewDeadLetterQueue[string](1)
		called := 0
		c.OnFailure = func(reliability.FailedElement[string]) { called++ }
		p, _ := reliability.NewProcessor(c)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		r := newRecorder(nil)
		res, err := p.Process(cctx, "x", r.fn)
		if !errors.Is(err, context.Canceled) || res.Outcome != reliability.OutcomeRejected || r.calls["x"] != 0 ||
			called != 0 || p.ConsecutiveFailures() != 0 || c.DeadLetterQueue.Len() != 0 {
			t.Errorf("done context: %+v, %v; want a rejection that runs and counts nothing", res, err)
		}
	})
	t.Run("nil function", func(t *testing.T) {
		p, _ := reliability.NewProcessor(reliability.NewConfig[string]())
		if _, err := p.Process(ctx, "x", nil); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("Process(nil) = %v", err)
		}
	})
}

func TestProcessConcurrent(t *testing.T) {
	c := quickConfig(reliability.StrategyDeadLetterQueue, 1)
	c.DeadLetterQueue = &reliability.DeadLetterQueue[string]{}
	c.MaxConsecutiveFailures = 1 << 30
	p, _ := reliability.NewProcessor(c)
	r := newRecorder(map[string]int{"bad": -1})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 100 {
				e := "good"
				if i%4 == 0 {
					e = "bad"
				}
				if _, err := p.Process(context.Background(), e, r.fn); err != nil {
					t.Errorf("Process = %v", err)
				}
			}
		})
	}
	wg.Wait()
	if got := c.DeadLetterQueue.Len(); got != 8*25 {
		t.Errorf("dead letters = %d, want %d", got, 8*25)
	}
}

func counterValue(t *testing.T, set *vm.Set, name string) uint64 {
	t.Helper()
	return set.GetOrCreateCounter(name).Get()
}

func TestProcessMetrics(t *testing.T) {
	c := quickConfig(reliability.StrategySkip, 0)
	c.Name = "test-metrics"
	p, _ := reliability.NewProcessor(c)
	r := newRecorder(map[string]int{"bad": -1})
	ctx := context.Background()
	p.Process(ctx, "ok", r.fn)
	p.Process(ctx, "ok", r.fn)
	p.Process(ctx, "bad", r.fn)
	for outcome, want := range map[string]uint64{"success": 2, "skipped": 1, "failed": 0} {
		name := metrics.Name("redis_streaming_reliability_outcomes_total", "name", "test-metrics", "outcome", outcome)
		if got := counterValue(t, metrics.Reliability, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}
