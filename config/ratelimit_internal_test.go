package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// TestRedisOptions: the Redis limiter keys become the engine's redisbackend.Options, and a
// section that sets none gives the engine's defaults.
func TestRedisOptions(t *testing.T) {
	br := redstream.BreakerOptions{Failures: -1, ErrorRate: 0.25, MinCalls: 40, Window: 30 * time.Second, CoolDown: 500 * time.Millisecond, Probes: 2}
	r := RedisLimiterSettings{Timeout: -time.Millisecond, Breaker: br, JavaCompatible: true}
	want := redisbackend.Options{KeyPrefix: "p", Timeout: -time.Millisecond, JavaCompatible: true, DisableLocalDenials: true, Breaker: br}
	if got := r.options("p"); !reflect.DeepEqual(got, want) {
		t.Errorf("options = %+v\nwant %+v", got, want)
	}
	o := defaultRedisSettings().options("")
	if o.Timeout != redisbackend.DefaultTimeout || o.DisableLocalDenials || o.Breaker.Failures != 3 || o.Breaker.ErrorRate != 0.5 ||
		o.Breaker.MinCalls != 20 || o.Breaker.Window != 10*time.Second || o.Breaker.CoolDown != time.Second || o.Breaker.Probes != 1 {
		t.Errorf("default options = %+v, want redisbackend's defaults", o)
	}
}
