package idempotency

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/health"
	"github.com/redstream-go/redstream/metrics"
)

// NewRedis returns an Idempotent whose records live in Redis (a single server or a
// cluster): at most once per key across every process sharing the server, Options.Name
// and Options.KeyPrefix. Each key has one record, a hash whose key's {hash tag} is the
// key's digest, so every script touches one slot. Every call is bounded by Options.Timeout
// and guarded by the breaker of Options.Breaker; Options.FailOpen says what happens when
// Redis fails. The client stays the caller's: nothing here closes it. A nil client is an
// error wrapping redstream.ErrInvalidConfig.
func NewRedis(client rueidis.Client, o Options) (*Idempotent, error) {
	if client == nil {
		return nil, fmt.Errorf("idempotency: %w: nil client", redstream.ErrInvalidConfig)
	}
	return newIdempotent(o, func(o Options) (engine, error) {
		g, err := newGuard(client, o)
		if err != nil {
			return nil, err
		}
		if g.br != nil {
			health.RegisterGauge(metrics.Dedup, metrics.Name(famBreaker, "name", o.Name), g.br.State)
		}
		return &redisEngine{c: client, g: g}, nil
	})
}

type redisEngine struct {
	c rueidis.Client
	g guard
}

var _ engine = (*redisEngine)(nil)

func ms(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

func (e *redisEngine) acquire(ctx context.Context, rk, key, fp, token string, lease, retention time.Duration) (reply, error) {
	var rep reply
	err := e.g.do(ctx, rk, true, func(ctx context.Context) error {
		vs, err := scriptAcquire.Exec(ctx, e.c, []string{rk}, []string{key, fp, token, ms(lease), ms(retention)}).ToArray()
		if err != nil {
			return err
		}
		if len(vs) == 0 {
			return fmt.Errorf("%w: empty acquire reply", errUnexpectedReply)
		}
		code, err := vs[0].AsInt64()
		if err != nil {
			return fmt.Errorf("%w: %w", errUnexpectedReply, err)
		}
		rep = reply{code: int(code)}
		switch {
		case code == stDone && len(vs) == 3:
			v, err1 := vs[1].ToString()
			x, err2 := vs[2].ToString()
			if err1 != nil || err2 != nil {
				return fmt.Errorf("%w: %v", errUnexpectedReply, vs)
			}
			rep.value, rep.tooLarge = []byte(v), x == "1"
		case code == stRunning && len(vs) == 2:
			left, err := vs[1].AsInt64()
			if err != nil {
				return fmt.Errorf("%w: %w", errUnexpectedReply, err)
			}
			rep.left = time.Duration(left) * time.Millisecond
		case code == stAcquired || code == stTakeover || code == stMismatch:
		default:
			return fmt.Errorf("%w: %v", errUnexpectedReply, vs)
		}
		return nil
	})
	return rep, err
}

// flag runs one of the scripts that answer 1 or 0.
func (e *redisEngine) flag(ctx context.Context, s *rueidis.Lua, rk string, args ...string) (bool, error) {
	var ok bool
	err := e.g.do(ctx, rk, false, func(ctx context.Context) error {
		n, err := s.Exec(ctx, e.c, []string{rk}, args).AsInt64()
		ok = n == 1
		return err
	})
	return ok, err
}

func (e *redisEngine) complete(ctx context.Context, rk, token string, value []byte, tooLarge bool, retention time.Duration) (bool, error) {
	x := ""
	if tooLarge {
		x = "1"
	}
	return e.flag(ctx, scriptComplete, rk, token, string(value), x, ms(retention))
}

func (e *redisEngine) release(ctx context.Context, rk, token string) error {
	_, err := e.flag(ctx, scriptRelease, rk, token)
	return err
}

func (e *redisEngine) renew(ctx context.Context, rk, token string, lease time.Duration) (bool, error) {
	return e.flag(ctx, scriptRenew, rk, token, ms(lease))
}
