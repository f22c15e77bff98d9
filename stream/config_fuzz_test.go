package stream_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestValidateBounds: every value that would panic, overflow or make no sense is rejected
// with an error naming the setting.
func TestValidateBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  stream.Config
		key  string
	}{
		{"huge read-count", stream.Config{ReadCount: 1 << 45}, "read-count"},
		{"negative read-count", stream.Config{ReadCount: -1}, "read-count"},
		{"huge max-retry", stream.Config{MaxDeliveries: 1 << 40}, "max-retry"},
		{"interval beyond a Duration", stream.Config{Autoclaim: stream.AutoclaimConfig{Interval: wrapMs(9.3e12)}}, "autoclaim.interval-ms"},
		{"interval of 1 ns", stream.Config{Autoclaim: stream.AutoclaimConfig{Interval: 1}}, "autoclaim.interval-ms"},
		{"huge interval", stream.Config{Autoclaim: stream.AutoclaimConfig{Interval: 1 << 62}}, "autoclaim.interval-ms"},
		{"negative min-idle", stream.Config{Autoclaim: stream.AutoclaimConfig{MinIdle: -time.Second}}, "autoclaim.min-idle-ms"},
		{"tiny min-idle", stream.Config{Autoclaim: stream.AutoclaimConfig{MinIdle: time.Millisecond}}, "autoclaim.min-idle-ms"},
		{"block under a millisecond (BLOCK 0 waits forever)", stream.Config{BlockTimeout: 500 * time.Microsecond}, "block-ms"},
		{"block of a day", stream.Config{BlockTimeout: 24 * time.Hour}, "block-ms"},
		{"negative trim interval", stream.Config{Trim: stream.TrimConfig{Interval: -1}}, "trim.interval-ms"},
		{"negative trim maxlen", stream.Config{Trim: stream.TrimConfig{MaxLen: -1}}, "trim.maxlen"},
		{"negative shutdown timeout", stream.Config{ShutdownTimeout: -1}, "shutdown-timeout-ms"},
		{"negative handler timeout", stream.Config{HandlerTimeout: -time.Second}, "handler-timeout-ms"},
		{"consumer timeout under the block time", stream.Config{BlockTimeout: 2 * time.Second, ConsumerTimeout: 3 * time.Second}, "consumer-timeout-ms"},
		{"negative max age", stream.Config{DeadLetter: stream.DeadLetterConfig{MaxAge: -time.Second}}, "dead-letter.max-age-ms"},
		{"unknown trim mode", stream.Config{Trim: stream.TrimConfig{Mode: "sometimes"}}, "trim.mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), "redis-stream."+tc.key+":") {
				t.Errorf("error %q does not name %s", err, tc.key)
			}
		})
	}
	if err := (stream.Config{ConsumerTimeout: -1}).Validate(); err != nil {
		t.Errorf("a negative ConsumerTimeout (removal off) is valid: %v", err)
	}
}

// TestRegisterBounds: handler settings out of range are errors, not panics at Start.
func TestRegisterBounds(t *testing.T) {
	c, err := stream.NewConsumer(redistest.Client(t), stream.Config{Metrics: vm.NewSet()})
	if err != nil {
		t.Fatal(err)
	}
	handle := func(context.Context, *stream.Message[order]) error { return nil }
	for _, h := range []stream.Handler[order]{
		{Topic: "a", Group: "g", Handle: handle, Concurrency: 1 << 40},
		{Topic: "b", Group: "g", Handle: handle, Concurrency: -1},
		{Topic: "c", Group: "g", Handle: handle, MaxDeliveries: 1 << 40},
		{Topic: "d", Group: "g", Handle: handle, Timeout: -time.Second},
		{Topic: "e", Group: "g", Handle: handle, Timeout: 1 << 62},
	} {
		if err := stream.Register(c, h); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("Register(%s: concurrency %d, max %d, timeout %v) = %v, want ErrInvalidConfig",
				h.Topic, h.Concurrency, h.MaxDeliveries, h.Timeout, err)
		}
	}
}

// wrapMs converts ms to a Duration the way careless code does: 9.3e12 ms wraps around.
func wrapMs(ms float64) time.Duration { n := int64(ms); return time.Duration(n) * time.Millisecond }

var fuzzSeq atomic.Int64

// FuzzConsumerConfig: NewConsumer, Register, Start and Close never panic, whatever the
// settings: invalid ones are errors naming the setting, valid ones run.
func FuzzConsumerConfig(f *testing.F) {
	f.Add(int64(1<<45), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(1))
	f.Add(int64(10), int64(3), int64(0), int64(0), int64(wrapMs(9.3e12)), int64(0), int64(0), int64(0), int64(0), int64(1<<40))
	f.Add(int64(10), int64(3), int64(time.Millisecond), int64(10*time.Millisecond), int64(10*time.Millisecond), int64(10*time.Millisecond), int64(time.Millisecond), int64(time.Second), int64(time.Millisecond), int64(3))
	f.Add(int64(0), int64(0), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(0))
	f.Add(int64(10000), int64(1000000), int64(time.Hour), int64(stream.MaxDuration), int64(stream.MaxDuration), int64(stream.MaxDuration), int64(time.Hour), int64(stream.MaxDuration), int64(stream.MaxDuration), int64(64))
	client := redistest.Client(f)
	f.Fuzz(func(t *testing.T, readCount, maxd, block, minIdle, interval, trimInterval, shutdown, consumerTimeout, handlerTimeout, concurrency int64) {
		cfg := stream.Config{
			ReadCount: int(readCount), MaxDeliveries: int(maxd), BlockTimeout: time.Duration(block),
			ShutdownTimeout: time.Duration(shutdown), ConsumerTimeout: time.Duration(consumerTimeout),
			HandlerTimeout: time.Duration(handlerTimeout),
			Autoclaim:      stream.AutoclaimConfig{MinIdle: time.Duration(minIdle), Interval: time.Duration(interval)},
			Trim:           stream.TrimConfig{Interval: time.Duration(trimInterval)},
			Metrics:        vm.NewSet(),
		}
		verr := cfg.Validate()
		c, err := stream.NewConsumer(client, cfg)
		if (err == nil) != (verr == nil) {
			t.Fatalf("NewConsumer = %v, Validate = %v", err, verr)
		}
		if err != nil {
			if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), "redis-stream.") {
				t.Fatalf("error %q: want ErrInvalidConfig naming the setting", err)
			}
			return
		}
		if concurrency > 64 || concurrency < -64 {
			concurrency %= 64 // keep the goroutine count of one run small; bounds are tested above
		}
		topic := fmt.Sprintf("fuzz-%d-%d", time.Now().UnixNano()%1e9, fuzzSeq.Add(1))
		err = stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: int(concurrency),
			Handle: func(context.Context, *stream.Message[order]) error { return nil }})
		if concurrency < 0 {
			if err == nil {
				t.Fatal("Register accepted a negative Concurrency")
			}
			return
		}
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Start(ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		_ = client.Do(ctx, client.B().Del().Key(topic).Build()).Error()
	})
}

// TestConfigTags: every field of Config (and its sections) carries a yaml tag, and every
// duration a unit tag, so that a generic binder can read the seed's section into it.
func TestConfigTags(t *testing.T) {
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name := path + f.Name
			tag, ok := f.Tag.Lookup("yaml")
			if !ok || tag == "" {
				t.Errorf("%s has no yaml tag", name)
				continue
			}
			if f.Type == reflect.TypeFor[time.Duration]() {
				if u := f.Tag.Get("unit"); u != "ms" {
					t.Errorf("%s is a duration with unit tag %q, want \"ms\"", name, u)
				}
				if !strings.HasSuffix(tag, "-ms") {
					t.Errorf("%s: yaml key %q lacks the seed's -ms suffix", name, tag)
				}
			}
			if f.Type.Kind() == reflect.Struct && tag != "-" {
				walk(f.Type, name+".")
			}
		}
	}
	walk(reflect.TypeFor[stream.Config](), "Config.")
}
