package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/redisbackend"
)

// The Redis deduplicators' operations the vectors record besides redstream.Deduplicator's,
// found by type assertion on what redisbackend.NewDeduplicator returns.
type (
	redisSet interface {
		redstream.Deduplicator
		Key() string
		CheckAndMarkBatch(ctx context.Context, elements []string) ([]bool, error)
		Remove(ctx context.Context, element string) error
	}
	redisWindow interface {
		redstream.TimedDeduplicator
		Keys() []string
		UniqueCountAt(ctx context.Context, now time.Time) (int64, error)
	}
	redisBloom interface {
		redstream.Deduplicator
		Params() core.Bloom
		Keys() []string
		Count(ctx context.Context) (int64, error)
		CheckAndMarkBatch(ctx context.Context, elements []string) ([]bool, error)
		IsDuplicateBatch(ctx context.Context, elements []string) ([]bool, error)
	}
)

// redisDedup returns the Redis deduplicator of spec as a T.
func redisDedup[T any](c rueidis.Client, name string, spec redstream.DedupSpec, o redisbackend.DedupOptions) (T, error) {
	var zero T
	d, err := redisbackend.NewDeduplicator(c, name, spec, o)
	if err != nil {
		return zero, err
	}
	t, ok := d.(T)
	if !ok {
		return zero, fmt.Errorf("redisbackend.NewDeduplicator(%s) is a %T, without the operations the vectors record", spec.Strategy, d)
	}
	return t, nil
}

func newRedisSet(c rueidis.Client, name string, o redisbackend.DedupOptions) (redisSet, error) {
	return redisDedup[redisSet](c, name, redstream.DedupSpec{Strategy: redstream.DedupSet}, o)
}

func newRedisWindow(c rueidis.Client, name string, window time.Duration, o redisbackend.DedupOptions) (redisWindow, error) {
	return redisDedup[redisWindow](c, name, redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: window}, o)
}

func newRedisBloom(c rueidis.Client, name string, spec redstream.DedupSpec, o redisbackend.DedupOptions) (redisBloom, error) {
	spec.Strategy = redstream.DedupBloom
	return redisDedup[redisBloom](c, name, spec, o)
}

// fingerprint is the canonical form of a limit's parameters that ends its Redis keys: the
// algorithm's name, then '.' and each of its ints in decimal (see js/src/keys.ts). The
// vectors check it against the keys redisbackend's limiters use.
func fingerprint(p core.Limit) string {
	b := []byte(p.Name())
	for _, x := range coreops.Ints(p) {
		b = append(b, '.')
		b = strconv.AppendInt(b, x, 10)
	}
	return string(b)
}
