package stream_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/stream"
)

func TestConfigValidate(t *testing.T) {
	if err := (stream.Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	for _, c := range []stream.Config{
		{ReadCount: -1}, {MaxDeliveries: -2}, {Autoclaim: stream.AutoclaimConfig{Interval: -1 * time.Millisecond}},
		{Trim: stream.TrimConfig{Mode: "x"}}, {EnvIsolation: true, Env: "a}"},
	} {
		if err := c.Validate(); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", c, err)
		}
		if _, err := stream.NewConsumer(nil, c); err == nil {
			t.Errorf("NewConsumer accepted %+v", c)
		}
	}
}
