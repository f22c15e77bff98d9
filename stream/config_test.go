package stream_test

import (
	"errors"
	"testing"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/stream"
)

func TestConfigValidate(t *testing.T) {
	if err := (stream.Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	for _, c := range []stream.Config{
		{ReadCount: -1}, {MaxRetry: -2}, {Autoclaim: stream.AutoclaimConfig{IntervalMs: -1}},
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
