package stream_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/stream"
)

func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want stream.Config
	}{
		{"empty document", "", stream.Config{}},
		{"no section", "spring:\n  redis:\n    host: x\n", stream.Config{}},
		{"null section", "redis-stream:\n", stream.Config{}},
		{"seed keys", `
spring:
  redis: {host: 127.0.0.1}
redis-stream:
  env-isolation: true
  env: "dev"
  consumer-name: "c1"
  read-count: 20
  block-ms: 500
  max-retry: 5
  autoclaim:
    min-idle-ms: 1000
    interval-ms: 200
  trim:
    maxlen: 50000
    interval-ms: 10000
`, stream.Config{EnvIsolation: true, Env: "dev", ConsumerName: "c1", ReadCount: 20, BlockTimeout: 500 * time.Millisecond, MaxDeliveries: 5,
			Autoclaim: stream.AutoclaimConfig{MinIdle: 1000 * time.Millisecond, Interval: 200 * time.Millisecond},
			Trim:      stream.TrimConfig{MaxLen: 50000, Interval: 10000 * time.Millisecond}}},
		{"camelCase and extras", `
redisStream:
  envIsolation: false
  readCount: "7"
  autoclaim: {minIdleMs: 50}
  trim: {maxLen: 9, mode: maxlen}
  deadLetter: {maxLen: -1, maxAgeMs: 86400000}
`, stream.Config{ReadCount: 7, Autoclaim: stream.AutoclaimConfig{MinIdle: 50 * time.Millisecond},
			Trim: stream.TrimConfig{MaxLen: 9, Mode: stream.TrimMaxLen}, DeadLetter: stream.DeadLetterConfig{MaxLen: -1, MaxAge: 86400000 * time.Millisecond}}},
		{"dotted keys", `
redis-stream.read-count: 3
redis-stream:
  autoclaim.interval-ms: 40
  trim.mode: "off"
`, stream.Config{ReadCount: 3, Autoclaim: stream.AutoclaimConfig{Interval: 40 * time.Millisecond}, Trim: stream.TrimConfig{Mode: stream.TrimOff}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stream.LoadConfig([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if got.Metrics != nil || got.OnError != nil {
				t.Fatal("LoadConfig set a non-YAML field")
			}
			if got.EnvIsolation != tc.want.EnvIsolation || got.Env != tc.want.Env || got.ConsumerName != tc.want.ConsumerName ||
				got.ReadCount != tc.want.ReadCount || got.BlockTimeout != tc.want.BlockTimeout || got.MaxDeliveries != tc.want.MaxDeliveries ||
				got.Autoclaim != tc.want.Autoclaim || got.Trim != tc.want.Trim || got.DeadLetter != tc.want.DeadLetter {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantPath string
	}{
		{"bad int", "redis-stream:\n  read-count: ten\n", "redis-stream.read-count"},
		{"negative", "redis-stream:\n  block-ms: -1\n", "redis-stream.block-ms"},
		{"nested bad int", "redis-stream:\n  autoclaim:\n    min-idle-ms: 1.5\n", "redis-stream.autoclaim.min-idle-ms"},
		{"bad bool", "redis-stream:\n  env-isolation: maybe\n", "redis-stream.env-isolation"},
		{"unknown key", "redis-stream:\n  raed-count: 1\n", "redis-stream.raed-count"},
		{"unknown nested key", "redis-stream:\n  trim:\n    max: 1\n", "redis-stream.trim.max"},
		{"bad mode", "redis-stream:\n  trim: {mode: sometimes}\n", "redis-stream.trim.mode"},
		{"mapping expected", "redis-stream:\n  autoclaim: 5\n", "redis-stream.autoclaim"},
		{"scalar expected", "redis-stream:\n  read-count: [1]\n", "redis-stream.read-count"},
		{"section not a mapping", "redis-stream: 5\n", "redis-stream"},
		{"out of range", "redis-stream:\n  max-retry: 99999999999\n", "redis-stream.max-retry"},
		{"not yaml", "redis-stream: [\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stream.LoadConfig([]byte(tc.yaml))
			if err == nil {
				t.Fatal("got nil error")
			}
			if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "stream: ") || !strings.Contains(err.Error(), tc.wantPath) {
				t.Errorf("error %q: want ErrInvalidConfig naming %q", err, tc.wantPath)
			}
		})
	}
}

func TestConfigFromNode(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("read-count: 4\ntrim: {maxlen: 8}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	c, err := stream.ConfigFromNode(&doc, "app.redis-stream")
	if err != nil || c.ReadCount != 4 || c.Trim.MaxLen != 8 {
		t.Fatalf("ConfigFromNode = %+v, %v", c, err)
	}
	if err := yaml.Unmarshal([]byte("read-count: x\n"), &doc); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.ConfigFromNode(&doc, "app.redis-stream"); err == nil || !strings.Contains(err.Error(), "app.redis-stream.read-count") {
		t.Errorf("error %v: want the caller's path", err)
	}
	if c, err := stream.ConfigFromNode(nil, ""); err != nil || c.ReadCount != 0 {
		t.Errorf("nil node = %+v, %v", c, err)
	}
}

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
