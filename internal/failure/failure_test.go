package failure_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/failure"
)

var (
	errTimeout = fmt.Errorf("engine: %w", context.DeadlineExceeded)
	errOpen    = fmt.Errorf("engine: %w", failure.ErrCircuitOpen)
	errDown    = errors.New("engine: connection refused")
)

func TestReasonOf(t *testing.T) {
	for err, want := range map[error]failure.Reason{
		errTimeout: failure.Timeout, errOpen: failure.BreakerOpen, errDown: failure.Error,
		fmt.Errorf("x: %w", context.Canceled): failure.Canceled, nil: failure.Error,
	} {
		if got := failure.ReasonOf(err); got != want {
			t.Errorf("ReasonOf(%v) = %q, want %q", err, got, want)
		}
	}
}

// tooLarge is bad input recognised by its BadInput method, as redisbackend.ErrTooLarge.
type tooLarge struct{}

func (tooLarge) Error() string  { return "too large" }
func (tooLarge) BadInput() bool { return true }

func TestIsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"empty key", fmt.Errorf("x: %w", failure.ErrEmptyKey), true},
		{"invalid cost", fmt.Errorf("x: %w", core.ErrInvalidCost), true},
		{"cost too large", core.ErrCostTooLarge, true},
		{"invalid time", core.ErrInvalidTime, true},
		{"invalid config", core.ErrInvalidConfig, true},
		{"BadInput method", fmt.Errorf("x: %w", tooLarge{}), true},
		{"joined", errors.Join(errDown, tooLarge{}), true},
		{"backend", errDown, false},
		{"timeout", errTimeout, false},
		{"breaker open", errOpen, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failure.IsBadInput(tc.err); got != tc.want {
				t.Errorf("IsBadInput(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestPrefixed: an error carries one package prefix, and still matches what it wraps.
func TestPrefixed(t *testing.T) {
	base := fmt.Errorf("%w: window = 0s", core.ErrInvalidConfig)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{base, "memory: invalid configuration: window = 0s"},
		{errors.New("dial: refused"), "memory: dial: refused"},
	} {
		got := failure.Prefixed("memory", tc.err)
		if got.Error() != tc.want || !errors.Is(got, tc.err) {
			t.Errorf("Prefixed(%q) = %q (Is %v), want %q", tc.err, got, errors.Is(got, tc.err), tc.want)
		}
	}
	if !errors.Is(failure.Prefixed("memory", base), core.ErrInvalidConfig) {
		t.Error("the prefixed error does not match ErrInvalidConfig")
	}
	if failure.Prefixed("memory", nil) != nil {
		t.Error("Prefixed(nil) is not nil")
	}
}
