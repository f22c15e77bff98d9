package redisbackend

import (
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
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
