package redstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

func memoryMulti(specs []redstream.Spec) (redstream.Limiter, error) {
	return memory.NewMultiLimiter(specs, memory.Options{})
}

func TestMultiAllOrNothing(t *testing.T) {
	m, err := redstream.Multi(memoryMulti,
		redstream.Rule{Name: "per-second", Spec: redstream.SlidingWindow(time.Second, 3)},
		redstream.Rule{Name: "per-minute", Spec: redstream.FixedWindow(time.Minute, 5)},
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1_700_000_040, 0) // aligned to a minute
	var allowed []bool
	for i := range 4 { // the per-second limit denies the 4th
		d, err := m.AllowN(ctx, "k", t0.Add(time.Duration(i)*time.Millisecond), 1)
		if err != nil {
			t.Fatal(err)
		}
		allowed = append(allowed, d.Allowed)
	}
	for i := range 3 { // one second later: 2 more fit the minute, then it denies
		d, _ := m.AllowN(ctx, "k", t0.Add(time.Second+time.Duration(i)*time.Millisecond), 1)
		allowed = append(allowed, d.Allowed)
	}
	if got, want := fmt.Sprint(allowed), "[true true true false true true false]"; got != want {
		t.Errorf("decisions = %s, want %s", got, want)
	}
	if _, err := m.AllowN(ctx, "k", t0, 4); !errors.Is(err, redstream.ErrCostTooLarge) {
		t.Errorf("cost above the smallest limit: %v, want ErrCostTooLarge", err)
	}
	mm, ok := m.(interface {
		Rules() []redstream.Rule
		Unwrap() redstream.Limiter
	})
	if !ok {
		t.Fatalf("Multi returned %T, without Rules and Unwrap", m)
	}
	rules := mm.Rules()
	if len(rules) != 2 || rules[0].Name != "per-second" || rules[1].Name != "per-minute" {
		t.Errorf("Rules() = %+v", rules)
	}
	rules[0].Name = "changed"
	if mm.Rules()[0].Name != "per-second" {
		t.Errorf("Rules() returned internal storage")
	}
	if _, ok := mm.Unwrap().(*memory.Limiter); !ok {
		t.Errorf("Unwrap() = %T, want *memory.Limiter", mm.Unwrap())
	}
}

func TestMultiBadInput(t *testing.T) {
	ok := redstream.Rule{Name: "a", Spec: redstream.TokenBucket(10, 1)}
	tests := []struct {
		name  string
		build func([]redstream.Spec) (redstream.Limiter, error)
		rules []redstream.Rule
		want  string
	}{
		{"nil builder", nil, []redstream.Rule{ok}, "nil build function"},
		{"no limits", memoryMulti, nil, "no rules"},
		{"empty name", memoryMulti, []redstream.Rule{{Spec: ok.Spec}}, "rules[0].Name is empty"},
		{"repeated name", memoryMulti, []redstream.Rule{ok, ok}, `rules[1].Name "a" is repeated`},
		{"bad spec", memoryMulti, []redstream.Rule{ok, {Name: "b", Spec: redstream.SlidingWindow(0, 1)}}, `rules[1] ("b").Spec`},
		{"nil from builder", func([]redstream.Spec) (redstream.Limiter, error) { return nil, nil }, []redstream.Rule{ok}, "nil limiter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redstream.Multi(tt.build, tt.rules...)
			if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Multi() error = %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := redstream.Multi(func([]redstream.Spec) (redstream.Limiter, error) { return nil, boom }, ok); !errors.Is(err, boom) {
		t.Errorf("builder error = %v, want it wrapped", err)
	}
}

func TestFailurePolicyWrapper(t *testing.T) {
	ctx := context.Background()
	down := errors.New("backend down")
	broken := &fakeLimiter{err: down}
	fallback, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 1), memory.Options{})
	tests := []struct {
		name     string
		policy   redstream.FailurePolicy
		fallback redstream.Limiter
		allowed  []bool
		wantErr  bool
	}{
		{"fail-closed", redstream.FailClosed, nil, []bool{false, false}, true},
		{"fail-open", redstream.FailOpen, nil, []bool{true, true}, false},
		{"fallback", redstream.FailFallback, fallback, []bool{true, false}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := redstream.WithFailurePolicy(broken, tt.policy, tt.fallback)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.allowed {
				d, err := l.AllowN(ctx, "k", time.Time{}, 1)
				if (err != nil) != tt.wantErr || d.Allowed != want {
					t.Errorf("call %d: %+v, %v; want allowed %v, error %v", i, d, err, want, tt.wantErr)
				}
			}
			// Bad input is never subject to the policy.
			bad, _ := redstream.WithFailurePolicy(&fakeLimiter{err: fmt.Errorf("engine: %w", redstream.ErrEmptyKey)}, tt.policy, tt.fallback)
			if _, err := bad.AllowN(ctx, "", time.Time{}, 1); !errors.Is(err, redstream.ErrEmptyKey) {
				t.Errorf("bad input under %v = %v, want ErrEmptyKey", tt.policy, err)
			}
			if p, ok := l.(interface {
				FailurePolicy() redstream.FailurePolicy
			}); tt.policy != redstream.FailClosed && (!ok || p.FailurePolicy() != tt.policy) {
				t.Errorf("wrapper does not report its policy %v", tt.policy)
			}
		})
	}
}

func TestLimitPeriod(t *testing.T) {
	tests := []struct {
		spec redstream.Spec
		want time.Duration
	}{
		{redstream.SlidingWindow(time.Second, 10), time.Second},
		{redstream.FixedWindow(time.Minute, 10), time.Minute},
		{redstream.SlidingCounter(10*time.Second, 10), 10 * time.Second},
		{redstream.TokenBucket(100, 50), 2 * time.Second},
		{redstream.LeakyBucket(10, 5), 2 * time.Second},
	}
	for _, tt := range tests {
		p, err := tt.spec.Core()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(p.Period()) * time.Microsecond; got != tt.want {
			t.Errorf("%v Period() = %v, want %v", tt.spec, got, tt.want)
		}
	}
}
