package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/stream"
)

// TestStreamSendTimeout: redis-stream.send-timeout-ms sets stream.Config.SendTimeout (in ms,
// or a duration string), defaults to stream.Config{}.WithDefaults().SendTimeout, and a value out of range is
// an error naming the key and its line.
func TestStreamSendTimeout(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{"redis-stream:\n  read-count: 1\n", stream.Config{}.WithDefaults().SendTimeout},
		{"redis-stream:\n  send-timeout-ms: 750\n", 750 * time.Millisecond},
		{"redis-stream:\n  send-timeout-ms: 1s\n", time.Second},
		{"redisStream:\n  sendTimeoutMs: 300\n", 300 * time.Millisecond},
	} {
		if got := load(t, tc.yaml, quiet).Stream.SendTimeout; got != tc.want {
			t.Errorf("%q: SendTimeout %v, want %v", tc.yaml, got, tc.want)
		}
	}
	for _, y := range []string{"redis-stream:\n  send-timeout-ms: -5\n", "redis-stream:\n  send-timeout-ms: 3600001\n"} {
		_, err := config.Load([]byte(y), quiet)
		if err == nil || !errors.Is(err, redstream.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "config: redis-stream.send-timeout-ms (line 2): ") {
			t.Errorf("%q: error %v, want one naming redis-stream.send-timeout-ms on line 2", y, err)
		}
	}
}
