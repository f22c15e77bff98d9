package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redstream-go/redstream"
)

// Limit is a handler's consumption limit (Handler.Limit): before Handle is called, each
// message is admitted under the key Key returns by a rate limiter, a concurrency limiter, or
// both. Limits on a shared engine (redisbackend) hold across every consumer, process and
// partition that uses the same limiter and keys: "at most 10 calls per second per
// customer", "at most 4 messages of one customer handled at once", or one key for a cap on
// the whole topic.
//
// A message that is not admitted is parked until the denial's RetryAfter and then handled:
//   - its delivery is taken back uncounted (its DeliveryCount does not grow by waiting, so
//     it never reaches MaxDeliveries or the dead-letter stream by waiting);
//   - it holds no handler slot and no place in hand while it waits, so the messages of
//     other keys flow (of its own key too, unless the handler is OrderedByKey, whose key
//     line waits behind it);
//   - it stays pending, owned by this consumer. If the consumer dies, another one takes it
//     over after Config.Autoclaim.MinIdle, as any pending entry (that takeover counts a
//     delivery, as every takeover does); a wait longer than MinIdle may likewise let
//     another consumer take it first, which asks the limit again.
//
// When a limiter call fails (Redis down, its deadline of 5 s passed), the message is
// parked for the handler's retry backoff, uncounted, and the failure is counted in
// redis_streaming_mq_background_errors_total{op="limit"} and passed to Config.OnError. A
// message Key returns an empty key for, or a limiter's refusal of bad input (a cost above
// the limit), is a failed delivery that is not retried: it is dead-lettered with the reason.
// Parked messages are counted in redis_streaming_mq_limited_total.
type Limit[T any] struct {
	// Rate admits each message at a cost of 1: a rate limiter or a multi-limit
	// (redstream.Multi: all limits or none). Nil: no rate limit.
	Rate redstream.Limiter
	// Concurrency caps the messages of one key being handled at once: a lease of 1 unit is
	// acquired before Handle, renewed every third of its lease TTL while Handle runs, and
	// released when it returns. A denial parks the message until the earliest lease of the
	// key expires. When both are set, Concurrency is asked first and its lease released
	// if Rate denies; compose rate limits into the concurrency limiter itself
	// (redisbackend.NewConcurrencyLimiter with several specs) to charge them only on
	// admission. Nil: no concurrency cap.
	Concurrency redstream.ConcurrencyLimiter
	// Key returns a message's limit key: a customer, a tenant, a constant for the whole
	// topic. Nil: the message's Key.
	Key func(msg *Message[T]) string
}

// limiter is a handler's consumption-limit role: the memory of denied keys, the state of
// the limiter's calls, and the parking of the deliveries it does not admit (handed to the
// retrier as own retries).
type limiter struct {
	*scope
	retr  *retrier
	state opState    // the limiter's calls: failing or not
	gates limitGates // the keys the rate limit denied, until when

	mu      sync.Mutex
	waiting map[string][]string // per key, the entries its concurrency limit denied, in order
}

func newLimiter(s *scope, retr *retrier) *limiter { return &limiter{scope: s, retr: retr} }

// check validates l for handler topic/group.
func (l *Limit[T]) check(topic, group string) error {
	if l.Rate == nil && l.Concurrency == nil {
		return errInvalid("handler %s/%s: Limit: neither Rate nor Concurrency is set", topic, group)
	}
	return nil
}

// badLimitInput reports a limiter's refusal of bad input: the limit can never admit the
// message.
func badLimitInput(err error) bool {
	return errors.Is(err, redstream.ErrEmptyKey) || errors.Is(err, redstream.ErrInvalidCost) ||
		errors.Is(err, redstream.ErrCostTooLarge) || errors.Is(err, redstream.ErrInvalidTime) ||
		errors.Is(err, redstream.ErrInvalidConfig)
}

// admitTyped asks m's consumption limit l whether m may be handled now. It returns the
// function to call once Handle has returned (it stops the lease's renewal and releases
// it), or a wait > 0 when m must be parked that long, or an error for a failed delivery.
func admitTyped[T any](ctx context.Context, rt *limiter, l *Limit[T], m *Message[T], deliveries int64) (done func(), wait time.Duration, err error) {
	key := m.Key
	if l.Key != nil {
		key = l.Key(m)
	}
	if key == "" {
		return nil, 0, Permanent(fmt.Errorf("stream: consumption limit: message %s has an empty limit key", m.ID))
	}
	failed := func(what string, err error) (func(), time.Duration, error) {
		err = fmt.Errorf("stream: consumption limit of %s/%s: %s %q: %w", rt.topic, rt.group, what, key, err)
		if badLimitInput(err) {
			return nil, 0, Permanent(err)
		}
		if ctx.Err() != nil {
			return nil, 0, err // cut short by the shutdown: the entry stays pending
		}
		rt.limitFailed(err)
		return nil, rt.retr.backoff(deliveries), nil
	}
	done = func() {}
	if l.Concurrency != nil {
		actx, cancel := rt.c.ioContext(ctx)
		lease, err := l.Concurrency.Acquire(actx, key, time.Time{}, 1)
		cancel()
		if err != nil {
			return failed("acquire", err)
		}
		if !lease.Allowed {
			rt.waitFor(key, m.ID)
			return nil, min(max(lease.RetryAfter, time.Millisecond), maxLeaseWait), nil
		}
		done = rt.holdLease(l.Concurrency, lease)
	}
	if l.Rate != nil {
		if wait := rt.gates.behind(key, time.Now()); wait > 0 {
			done()
			return nil, wait, nil
		}
		actx, cancel := rt.c.ioContext(ctx)
		d, err := l.Rate.AllowN(actx, key, time.Time{}, 1)
		cancel()
		if err != nil {
			done()
			return failed("decide", err)
		}
		if !d.Allowed {
			done()
			return nil, rt.gates.close(key, time.Now(), d), nil
		}
	}
	rt.state.ok(rt.log, "stream: consumption limit works again")
	return done, 0, nil
}

// limitFailed counts and reports a failed limiter call (logged once per run of failures).
func (h *limiter) limitFailed(err error) {
	h.m.backgroundError(opLimit)
	h.state.fail(h.log, "stream: consumption limit fails; messages wait for it", err)
	h.c.report(err)
}

// holdLease renews lease every third of its TTL until the returned function is called,
// which stops the renewal and releases the lease (each call bounded by the I/O deadline).
func (h *limiter) holdLease(cl redstream.ConcurrencyLimiter, lease redstream.Lease) (done func()) {
	every := time.Until(lease.Expiry) / 3
	stop, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		if every <= 0 {
			return
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := h.c.ioContext(context.Background())
			_, err := cl.Extend(ctx, lease, time.Time{})
			cancel()
			if errors.Is(err, redstream.ErrLeaseLost) {
				h.limitFailed(fmt.Errorf("stream: consumption limit of %s/%s: lease of %q: %w", h.topic, h.group, lease.Key, err))
				return
			}
			if err != nil {
				h.limitFailed(fmt.Errorf("stream: consumption limit of %s/%s: extend the lease of %q: %w", h.topic, h.group, lease.Key, err))
			}
		}
	}()
	return func() {
		close(stop)
		<-ended
		ctx, cancel := h.c.ioContext(context.Background())
		_, err := cl.Release(ctx, lease, time.Time{})
		cancel()
		if err != nil {
			h.limitFailed(fmt.Errorf("stream: consumption limit of %s/%s: release the lease of %q (it frees itself at its expiry): %w", h.topic, h.group, lease.Key, err))
			return
		}
		h.wakeOne(lease.Key)
	}
}

// maxLeaseWait caps how long a message the concurrency limit denied waits before it asks
// again: a slot may be freed by another consumer's release, which this one does not see
// (its own releases wake the next waiter at once: wakeOne).
const maxLeaseWait = time.Second

// maxWaiting bounds the waiters remembered per key; the oldest are forgotten first (they
// still ask again after maxLeaseWait).
const maxWaiting = 10_000

// waitFor remembers id as denied by key's concurrency limit, for wakeOne.
func (h *limiter) waitFor(key, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting == nil {
		h.waiting = map[string][]string{}
	}
	w := append(h.waiting[key], id)
	if len(w) > maxWaiting {
		w = w[len(w)-maxWaiting:]
	}
	h.waiting[key] = w
}

// wakeOne makes the first entry still parked behind key's concurrency limit due now: a
// slot of key was just released here.
func (h *limiter) wakeOne(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waiting[key]
	for len(w) > 0 {
		id := w[0]
		w = w[1:]
		if h.retr.wake(id) {
			break
		}
	}
	if len(w) == 0 {
		delete(h.waiting, key)
	} else {
		h.waiting[key] = w
	}
}

// park takes back the delivery j of an entry its limit did not admit (park.lua: uncounted,
// idle from now) and schedules its redelivery after wait. It reports whether the entry left
// the held set; when the script fails, or the delivery is stale, it stays pending, for the
// pending-entry scan (a failure is counted and reported).
func (h *limiter) park(j job, wait time.Duration) bool {
	ctx, cancel := h.c.ioContext(h.hardCtx)
	n, err := parkScript.Exec(ctx, h.c.client, []string{h.stream},
		[]string{h.group, h.c.name, j.e.id, strconv.FormatInt(j.deliveries, 10)}).AsInt64()
	cancel()
	if err != nil {
		if isNoGroup(err) {
			h.recoverGroup()
		}
		h.limitFailed(fmt.Errorf("stream: park %s of %q for its consumption limit: %w", j.e.id, h.stream, err))
		return false
	}
	if n == 0 {
		return false // acknowledged, taken over or delivered again since: nothing to park
	}
	h.m.limited.Inc()
	h.retr.park(j.e.id, j.deliveries-1, wait)
	return true
}

// maxGates bounds the keys a handler remembers as closed; past it, expired ones are dropped,
// and then new denials are not remembered (their messages ask the limiter themselves).
const maxGates = 100_000

// limitGates remember, per limit key, until when the rate limit denied it: a message of a
// closed key is parked without asking the limiter, and the messages parked behind one
// denial are spread over the time the limit takes to admit them (the i-th waits i/Limit of
// the denial's ResetAfter more), so that they do not all ask again at once only for all
// but a few to be denied (a thundering herd costing a decision and a park per message per
// window). The limiter stays the only judge: a message that wakes asks it.
type limitGates struct {
	mu sync.Mutex
	m  map[string]*limitGate
}

type limitGate struct {
	until   time.Time     // the denial's end: its time plus RetryAfter
	step    time.Duration // ResetAfter / Limit: the spacing of the waiters
	waiters int           // messages parked behind this denial
}

// close records d, a denial of key at now, and returns how long its message waits.
func (g *limitGates) close(key string, now time.Time, d redstream.Decision) time.Duration {
	wait := max(d.RetryAfter, time.Millisecond)
	var step time.Duration
	if d.Limit > 0 {
		step = d.ResetAfter / time.Duration(d.Limit)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]*limitGate{}
	}
	if len(g.m) >= maxGates {
		for k, x := range g.m {
			if !now.Before(x.until) {
				delete(g.m, k)
			}
		}
		if len(g.m) >= maxGates {
			return wait
		}
	}
	g.m[key] = &limitGate{until: now.Add(wait), step: step, waiters: 1}
	return wait
}

// behind returns how long a message of key waits behind the key's last denial, 0 when the
// key is not closed at now (the message asks the limiter).
func (g *limitGates) behind(key string, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	x, ok := g.m[key]
	if !ok {
		return 0
	}
	if !now.Before(x.until) {
		delete(g.m, key)
		return 0
	}
	wait := x.until.Sub(now) + time.Duration(x.waiters)*x.step
	x.waiters++
	return wait
}
