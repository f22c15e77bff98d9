package redisbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
)

// AllowBatch decides a request of cost n for each of keys at now (the zero time reads each
// server's TIME), in one pipelined round trip (a cluster client sends one pipeline per node).
// Decision i is for keys[i]; a key listed twice is decided twice, in order. Bad input (any
// key empty or too large, a bad n or now) returns an error and no Redis call. When Redis
// fails for some keys, those keys follow the FailurePolicy; under FailClosed their
// decisions are denied zero values and the error reports how many failed and the first
// failure. The batch is not atomic across keys: each key's decision is.
func (l *Limiter) AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]redstream.Decision, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	for i, k := range keys {
		if err := l.check(k, now, n); err != nil {
			return nil, fmt.Errorf("redisbackend: batch key %d: %w", i, err)
		}
	}
	args := l.args(now, n)
	calls := make([]rueidis.LuaExec, len(keys))
	for i, k := range keys {
		calls[i] = rueidis.LuaExec{Keys: l.Keys(k), Args: args}
	}
	res := l.script.execMulti(ctx, l.client, calls)
	out := make([]redstream.Decision, len(keys))
	var first error
	failed := 0
	for i, r := range res {
		d, err := l.parse(r)
		if err != nil {
			d, err = l.fail(ctx, keys[i], now, n, err)
		}
		if err != nil {
			failed++
			if first == nil {
				first = fmt.Errorf("key %d: %w", i, err)
			}
		}
		out[i] = d
	}
	if first != nil {
		return out, fmt.Errorf("redisbackend: batch: %d of %d decisions failed; %w", failed, len(keys), first)
	}
	return out, nil
}
