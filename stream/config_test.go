package stream_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
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

// TestDefaultsValidForLongBlock: the defaults filled in stay valid whatever valid
// BlockTimeout is set (the default ConsumerTimeout grows with it).
func TestDefaultsValidForLongBlock(t *testing.T) {
	for _, block := range []time.Duration{time.Millisecond, 2 * time.Second, 700 * time.Second, stream.MaxBlockTimeout} {
		c := stream.Config{BlockTimeout: block}
		if err := c.Validate(); err != nil {
			t.Fatalf("BlockTimeout %v: Validate: %v", block, err)
		}
		d := c.WithDefaults()
		if err := d.Validate(); err != nil {
			t.Errorf("BlockTimeout %v: defaults %v invalid: %v", block, d.ConsumerTimeout, err)
		}
		if d.ConsumerTimeout < stream.DefaultConsumerTimeout {
			t.Errorf("BlockTimeout %v: ConsumerTimeout %v below the default", block, d.ConsumerTimeout)
		}
	}
}

// TestConsumerNameRules: a blank consumer-name generates a unique name per Consumer (two
// Consumers never share one), and a name with white space at an end or a control
// character is an error naming the key.
func TestConsumerNameRules(t *testing.T) {
	client := redistest.Client(t)
	names := map[string]bool{}
	for _, blank := range []string{"", "   ", "\t\n"} {
		c, err := stream.NewConsumer(client, stream.Config{ConsumerName: blank, Metrics: fastConfig().Metrics})
		if err != nil {
			t.Fatalf("ConsumerName %q: %v", blank, err)
		}
		if n := c.Stats().Consumer; strings.TrimSpace(n) != n || n == "" || names[n] {
			t.Errorf("ConsumerName %q: generated %q, want a new unique name", blank, n)
		}
		names[c.Stats().Consumer] = true
	}
	for _, bad := range []string{" a", "a ", "a\x00b", "a\nb"} {
		err := stream.Config{ConsumerName: bad}.Validate()
		if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), "redis-stream.consumer-name") {
			t.Errorf("ConsumerName %q: %v, want an error naming redis-stream.consumer-name", bad, err)
		}
	}
	if err := (stream.Config{ConsumerName: "worker 1"}).Validate(); err != nil {
		t.Errorf("ConsumerName %q: %v", "worker 1", err)
	}
}
