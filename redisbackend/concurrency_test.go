package redisbackend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

func TestNewConcurrencyLimiterErrors(t *testing.T) {
	c, _ := miniClient(t)
	cc := redstream.Concurrency(2, time.Second)
	if _, err := NewConcurrencyLimiter(nil, []redstream.Spec{cc}, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("nil client: %v", err)
	}
	for name, specs := range map[string][]redstream.Spec{
		"none":           nil,
		"no concurrency": {redstream.FixedWindow(time.Second, 3)},
		"two":            {cc, cc},
		"bad ttl":        {redstream.Concurrency(2, 0)},
	} {
		if _, err := NewConcurrencyLimiter(c, specs, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := NewConcurrencyLimiter(c, []redstream.Spec{cc}, Options{KeyPrefix: "a{b"}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("bad prefix: %v", err)
	}
}

// TestNewConcurrencyLimiterRefusesCarry: Options.Previous and Options.Carry are refused with
// the reason (a concurrency limiter's leases do not carry across a limit change), rather
// than accepted and every Acquire failing; without them the same specs acquire.
func TestNewConcurrencyLimiterRefusesCarry(t *testing.T) {
	c, _ := miniClient(t)
	fw := redstream.FixedWindow(time.Minute, 10)
	specs := []redstream.Spec{redstream.Concurrency(2, time.Second), fw}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"previous and carry", Options{Previous: []redstream.Spec{{}, redstream.FixedWindow(time.Minute, 5)}, Carry: core.CarryAsIs}},
		{"previous, proportional", Options{Previous: []redstream.Spec{{}, fw}, Carry: core.CarryProportional}},
		{"previous alone", Options{Previous: []redstream.Spec{{}, fw}}},
		{"carry alone", Options{Carry: core.CarryAsIs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewConcurrencyLimiter(c, specs, tc.o)
			if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), "leases do not carry across a limit change") {
				t.Errorf("got %v, want ErrInvalidConfig saying leases do not carry", err)
			}
		})
	}
	l, err := NewConcurrencyLimiter(c, specs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(t.Context(), "k", time.Unix(1_900_000_000, 0), 1)
	if err != nil || !lease.Allowed {
		t.Fatalf("Acquire without carry: %+v, %v", lease, err)
	}
}
