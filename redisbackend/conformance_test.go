package redisbackend

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/proptest"
)

// TestConformance proves every engine equal to core (package proptest) on miniredis, a real
// redis-server and a real 3-master cluster, at explicit times.
func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			o := proptest.Options{Checks: checks(b.name != "miniredis")}
			t.Run("limiter", func(t *testing.T) {
				proptest.TestLimiter(t, limiterFactory(c), o)
			})
			t.Run("multi", func(t *testing.T) {
				proptest.TestMultiLimiter(t, multiFactory(c), o)
			})
			t.Run("concurrency", func(t *testing.T) {
				proptest.TestConcurrencyLimiter(t, concurrencyFactory(c), o)
			})
			t.Run("reserve", func(t *testing.T) {
				proptest.TestReserver(t, multiFactory(c), o)
			})
			t.Run("dedup", func(t *testing.T) {
				proptest.TestDeduplicator(t, dedupFactory(c), o)
			})
		})
	}
}

func limiterFactory(c rueidis.Client) proptest.LimiterFactory {
	prefix := uniq("pt")
	return func(spec redstream.Spec) (redstream.Limiter, error) {
		return NewLimiter(c, spec, Options{KeyPrefix: prefix + ":" + string(spec.Algorithm)})
	}
}

func multiFactory(c rueidis.Client) proptest.MultiFactory {
	prefix := uniq("ptm")
	return func(specs []redstream.Spec) (redstream.Limiter, error) {
		return NewMultiLimiter(c, specs, Options{KeyPrefix: prefix})
	}
}

func dedupFactory(c rueidis.Client) proptest.DedupFactory {
	return func(spec redstream.DedupSpec) (redstream.Deduplicator, error) {
		return NewDeduplicator(c, uniq("ptd"), spec, DedupOptions{})
	}
}

func concurrencyFactory(c rueidis.Client) proptest.ConcurrencyFactory {
	prefix := uniq("ptc")
	return func(specs []redstream.Spec) (redstream.ConcurrencyLimiter, error) {
		return NewConcurrencyLimiter(c, specs, Options{KeyPrefix: prefix})
	}
}
