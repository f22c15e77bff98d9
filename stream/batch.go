package stream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// MaxBatch is the most messages one SendBatch call takes.
const MaxBatch = 10_000

// SendResult is the outcome of one message of a SendBatch call: its entry id, or the error
// that kept it out of the stream.
type SendResult struct {
	// ID is the new entry's id; empty when Err is set.
	ID string
	// Err is why the message was not written: it could not be encoded, its headers were
	// invalid, middleware refused it, or Redis failed.
	Err error
}

// SendBatch writes msgs to topic in one round trip (one pipelined DoMulti of XADDs; an
// unpartitioned topic is one stream, so on a cluster one hash slot and one node; the
// messages of a partitioned topic go to their partitions, and rueidis sends one pipeline
// per node, in parallel) and returns one result
// per message, in order. A message that cannot be encoded (or that middleware refuses)
// does not stop the others. The error is nil when every message was written; otherwise it
// says how many failed and gives the first failure, which is also in its result. A bad
// topic name, more than MaxBatch messages, a nil message or bad idempotency keys fail the
// whole call (nil results, an error wrapping redstream.ErrInvalidConfig), and so does a
// failed probe for XADD IDMP (see WithIdempotencyKey; nil results, its error), before
// anything is sent. Middleware added by Use runs for
// each message, each in its own goroutine, and sees its own id or error; a middleware that
// calls next a second time gets a separate XADD.
//
// The call has the deadline of Send (the earlier of ctx's and Config.SendTimeout) and
// returns by it even when Redis hangs; then every unanswered message's Err wraps
// ErrOutcomeUnknown: it may have been written. WithIdempotencyKeys gives each message a key
// so that the batch, or its failed messages, can be sent again without duplicates (each
// message with its own key again).
func (p *Producer) SendBatch(ctx context.Context, topic string, msgs []Sendable, opts ...SendOption) ([]SendResult, error) {
	ctx, cancel := p.sendContext(ctx)
	defer cancel()
	if len(msgs) > MaxBatch {
		return nil, errInvalid("SendBatch: %d messages, at most %d", len(msgs), MaxBatch)
	}
	t, err := p.topic(topic)
	if err != nil {
		return nil, err
	}
	var o sendOptions
	for _, f := range opts {
		f(&o)
	}
	if o.delayErr != nil {
		return nil, o.delayErr
	}
	if err := o.checkIdem(true, len(msgs)); err != nil {
		return nil, err
	}
	if err := o.checkUnique(true); err != nil {
		return nil, err
	}
	if err := o.checkPriority(topic, t); err != nil {
		return nil, err
	}
	f := p.send.Load()
	outs := make([]*Outgoing, len(msgs))
	for i, m := range msgs {
		if outs[i], err = p.outgoing(topic, t, m, o, f != nil); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if o.idems != nil {
			outs[i].idem = o.idems[i]
		}
	}
	if len(o.idems) > 0 {
		if err := p.probeIDMP(ctx, t.streams[0]); err != nil {
			return nil, err
		}
	}
	res := make([]SendResult, len(msgs))
	if f == nil {
		p.sendBuilt(ctx, outs, res)
	} else {
		p.sendThrough(ctx, *f, outs, res)
	}
	failed, first := 0, -1
	for i := range res {
		if res[i].Err != nil {
			if failed++; first < 0 {
				first = i
			}
		}
	}
	if failed > 0 {
		return res, fmt.Errorf("stream: SendBatch to %q: %d of %d messages failed; message %d: %w", topic, failed, len(msgs), first, res[first].Err)
	}
	return res, nil
}

// sendBuilt encodes outs and writes them in one DoMulti, filling res.
func (p *Producer) sendBuilt(ctx context.Context, outs []*Outgoing, res []SendResult) {
	cmds := make(rueidis.Commands, 0, len(outs))
	idx := make([]int, 0, len(outs))
	for i, out := range outs {
		cmd, err := p.build(out)
		if err != nil {
			res[i].Err = err
			continue
		}
		cmds = append(cmds, cmd)
		idx = append(idx, i)
	}
	if len(cmds) == 0 {
		return
	}
	for k, r := range p.doMulti(ctx, cmds) {
		i := idx[k]
		res[i].ID, res[i].Err = p.result(outs[i], r)
	}
}

// sendThrough runs each message's middleware chain in its own goroutine. The chains'
// innermost calls hand their XADD to one DoMulti, sent once every chain has either
// reached its innermost call or returned without it, and then get their own reply.
func (p *Producer) sendThrough(ctx context.Context, chain SendFunc, outs []*Outgoing, res []SendResult) {
	n := len(outs)
	var (
		mu      sync.Mutex
		cmds    = make([]rueidis.Completed, n)
		has     = make([]bool, n)
		batched bool // the DoMulti's commands are taken
		replies = make([]rueidis.RedisResult, n)
		used    = make([]atomic.Bool, n)
		arrived sync.WaitGroup // one per message: its chain reached write or returned
		sent    = make(chan struct{})
		done    sync.WaitGroup
	)
	arrived.Add(n)
	done.Add(n)
	for i := range outs {
		go func() {
			defer done.Done()
			var once sync.Once
			arrive := func() { once.Do(arrived.Done) }
			defer arrive()
			terminal := func(ctx context.Context, out *Outgoing) (string, error) {
				if used[i].Swap(true) {
					return p.writeDirect(ctx, out) // a second call: on its own
				}
				cmd, err := p.build(out)
				if err != nil {
					arrive()
					return "", err
				}
				mu.Lock()
				if batched {
					mu.Unlock() // the batch left without it (next called after the chain returned)
					return p.result(out, p.do(ctx, cmd))
				}
				cmds[i], has[i] = cmd, true
				mu.Unlock()
				arrive()
				<-sent
				return p.result(out, replies[i])
			}
			out := outs[i]
			out.next = terminal
			defer func() {
				if r := recover(); r != nil {
					res[i].Err = fmt.Errorf("stream: SendBatch: send middleware panicked on message %d: %v", i, r)
				}
			}()
			res[i].ID, res[i].Err = chain(ctx, out)
		}()
	}
	arrived.Wait()
	mu.Lock()
	batched = true
	batch := make(rueidis.Commands, 0, n)
	idx := make([]int, 0, n)
	for i := range cmds {
		if has[i] {
			batch = append(batch, cmds[i])
			idx = append(idx, i)
		}
	}
	mu.Unlock()
	if len(batch) > 0 {
		for k, r := range p.doMulti(ctx, batch) {
			replies[idx[k]] = r
		}
	}
	close(sent)
	done.Wait()
}
