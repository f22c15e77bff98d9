package stream

import (
	"testing"
	"time"
)

func TestDefaultRetryPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    []time.Duration // NextBackoff(1), NextBackoff(2), ...
		maxDels int
	}{
		{"defaults", Config{}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}, 3},
		{"the seed's: retry-backoff = min-idle", Config{RetryBackoff: time.Minute}, []time.Duration{time.Minute, time.Minute}, 3},
		{"min-idle below retry-backoff", Config{Autoclaim: AutoclaimConfig{MinIdle: 150 * time.Millisecond}, MaxDeliveries: 5},
			[]time.Duration{150 * time.Millisecond, 150 * time.Millisecond}, 5},
		{"longest settings", Config{RetryBackoff: maxDuration / 2, Autoclaim: AutoclaimConfig{MinIdle: maxDuration}},
			[]time.Duration{maxDuration / 2, maxDuration, maxDuration}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultRetryPolicy(tc.cfg.WithDefaults())
			if got := p.MaxDeliveries(); got != tc.maxDels {
				t.Errorf("MaxDeliveries = %d, want %d", got, tc.maxDels)
			}
			for i, want := range tc.want {
				if got := p.NextBackoff(int64(i + 1)); got != want {
					t.Errorf("NextBackoff(%d) = %v, want %v", i+1, got, want)
				}
			}
			if got := p.NextBackoff(maxMaxDeliveries); got != tc.want[len(tc.want)-1] {
				t.Errorf("NextBackoff(maxMaxDeliveries) = %v, want %v", got, tc.want[len(tc.want)-1])
			}
		})
	}
}
