package stream

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// Partition ownership (Handler.OwnPartitions). A handler of a topic of P partitions runs one
// coordinator goroutine per Consumer. Every PartitionLease/5 it
//
//   - records the consumer's heartbeat in the topic's members set (members_beat.lua), which
//     also counts the live members n;
//   - renews the leases of the partitions it owns (owner_renew.lua); a partition whose lease
//     is found taken, or not renewed for half the lease time, is given up at once (fenced:
//     its handler runtime is cancelled and acknowledges nothing more);
//   - releases the partitions above its fair share ceil(P/n), after draining them as
//     Unregister does (acknowledging what finished) and then deleting the lease;
//   - claims free partitions (SET NX PX) up to its share, starting at a partition that
//     depends on its name so that consumers joining together try different ones first.
//
// A claimed partition is read by a fresh single-stream runtime that first takes over the
// group's pending entries of the partition (XCLAIM, whichever consumer held them) and
// handles them in stream order before reading new entries (retrier.catchUp).

// ownerSet is one OwnPartitions handler of a Consumer.
type ownerSet struct {
	c            *Consumer
	topic        string // the topic (Handler.Topic)
	label        string // its name in logs and metrics
	group        string
	streams      []string
	leases       []string // streamwire.PartitionLeaseKey of each partition
	members      string   // streamwire.PartitionMembersKey
	startID      string
	mk           func(i int, takeover bool) *handlerRT
	log          *slog.Logger
	ttl          time.Duration
	ctx          context.Context
	cancel       context.CancelFunc
	done         chan struct{}
	beatState    opState
	renewState   opState
	claimState   opState
	releaseState opState

	mu    sync.Mutex
	owned map[int]*ownedPart
}

// ownedPart is one partition an ownerSet holds.
type ownedPart struct {
	rt        *handlerRT
	renewedAt time.Time     // when the last successful renewal (or the claim) was sent
	releasing bool          // being drained before its release
	released  chan struct{} // closed when the release is done
}

func newOwnerSet(c *Consumer, topic, label, group string, streams []string, startID string, mk func(int, bool) *handlerRT, log *slog.Logger) *ownerSet {
	o := &ownerSet{c: c, topic: topic, label: label, group: group, streams: streams, startID: startID, mk: mk,
		log: log, ttl: c.cfg.PartitionLease, done: make(chan struct{}), owned: map[int]*ownedPart{}}
	base, _ := streamName(c.cfg, topic)
	o.members = streamwire.PartitionMembersKey(base, group)
	o.leases = make([]string, len(streams))
	for i, s := range streams {
		o.leases[i] = streamwire.PartitionLeaseKey(s, group)
	}
	o.ctx, o.cancel = context.WithCancel(c.runCtx)
	return o
}

// addOwned registers o in c (Register of an OwnPartitions handler).
func (c *Consumer) addOwned(o *ownerSet) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	probe := "\x00owned:" + o.label
	if err := c.canAdd(o.label, o.group, probe); err != nil {
		return err
	}
	for _, s := range o.streams {
		if err := c.canAdd(o.label, o.group, s); err != nil {
			return err
		}
	}
	if c.state == stateRunning {
		c.mu.Unlock()
		ctx, cancel := c.ioContext(context.Background())
		err := o.ensureGroups(ctx)
		cancel()
		c.mu.Lock()
		if err != nil {
			return err
		}
		if err := c.canAdd(o.label, o.group, probe); err != nil {
			return err
		}
		c.owners = append(c.owners, o)
		c.startLoops()
		o.start()
		o.log.Info("stream: handler started; it owns partitions by lease", "partitions", len(o.streams))
		return nil
	}
	c.owners = append(c.owners, o)
	return nil
}

// ensureGroups creates the group on every partition.
func (o *ownerSet) ensureGroups(ctx context.Context) error {
	for i := range o.streams {
		s := &scope{c: o.c, stream: o.streams[i], group: o.group}
		if err := s.ensureGroup(ctx, o.startID); err != nil {
			return err
		}
	}
	return nil
}

// handles reports whether o is the handler of topic and group.
func (o *ownerSet) handles(topic, group string) bool { return o.topic == topic && o.group == group }

// failing returns an error when o's heartbeats or lease renewals are failing.
func (o *ownerSet) failing() error {
	if o.beatState.isFailing() || o.renewState.isFailing() {
		return fmt.Errorf("stream: partition leases of %s/%s are failing", o.label, o.group)
	}
	return nil
}

// start starts the coordinator; c.mu is held.
func (o *ownerSet) start() {
	o.c.wg.Add(1)
	go func() {
		defer o.c.wg.Done()
		defer close(o.done)
		o.run()
	}()
}

// stop stops the coordinator (Unregister): its partitions are drained, then released.
func (o *ownerSet) stop(ctx context.Context) error {
	o.cancel()
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *ownerSet) period() time.Duration { return max(o.ttl/5, 10*time.Millisecond) }

// run is the coordinator loop.
func (o *ownerSet) run() {
	t := time.NewTicker(o.period())
	defer t.Stop()
	for {
		o.tick()
		select {
		case <-o.ctx.Done():
			o.exit()
			return
		case <-t.C:
		}
	}
}

// tick is one round: heartbeat, renewals, releases, claims.
func (o *ownerSet) tick() {
	c := o.c
	ctx, cancel := c.ioContext(o.ctx)
	defer cancel()
	// A round never outlasts a third of the lease: a hung call returns in time for the
	// owner to fence its partitions (at half the lease) before the lease can expire.
	ctx, cancel2 := context.WithTimeout(ctx, o.ttl/3)
	defer cancel2()
	ttl := strconv.FormatInt(o.ttl.Milliseconds(), 10)
	n, err := membersBeatScript.Exec(ctx, c.client, []string{o.members}, []string{c.name, ttl, "0"}).AsInt64()
	if o.ctx.Err() != nil {
		return
	}
	if err != nil {
		o.fail(&o.beatState, "stream: partition heartbeats fail; no partition is claimed meanwhile", err)
	} else {
		o.beatState.ok(o.log, "stream: partition heartbeats work again")
	}
	o.renew(ctx, ttl)
	if err != nil || n < 1 {
		return
	}
	share := (len(o.streams) + int(n) - 1) / int(n)
	o.mu.Lock()
	active := 0
	var extra []int
	for i := len(o.streams) - 1; i >= 0; i-- {
		if p, ok := o.owned[i]; ok && !p.releasing {
			if active++; active > share {
				extra = append(extra, i)
			}
		}
	}
	for _, i := range extra {
		o.owned[i].releasing = true
		active--
	}
	o.mu.Unlock()
	for _, i := range extra {
		go o.release(i)
	}
	if active >= share {
		return
	}
	start := streamwire.PartitionOf(c.name, len(o.streams))
	for k := range o.streams {
		if active >= share || o.ctx.Err() != nil {
			return
		}
		i := (start + k) % len(o.streams)
		o.mu.Lock()
		_, mine := o.owned[i]
		o.mu.Unlock()
		if mine {
			continue
		}
		sent := time.Now()
		err := c.client.Do(ctx, c.client.B().Set().Key(o.leases[i]).Value(c.name).Nx().PxMilliseconds(o.ttl.Milliseconds()).Build()).Error()
		if rueidis.IsRedisNil(err) {
			continue // owned by another consumer
		}
		if err != nil {
			o.fail(&o.claimState, "stream: partition claims fail", err)
			return
		}
		o.claimState.ok(o.log, "stream: partition claims work again")
		if o.take(i, sent) {
			active++
		}
	}
}

// fail counts and logs (once per change of state) a failed coordinator call.
func (o *ownerSet) fail(s *opState, msg string, err error) {
	o.c.cfg.Metrics.GetOrCreateCounter(backgroundErrorName(o.label, -1, o.group, opLease)).Inc()
	s.fail(o.log, msg, err)
	o.c.report(err)
}

// take starts reading partition i, whose lease was claimed at sent.
func (o *ownerSet) take(i int, sent time.Time) bool {
	c := o.c
	rt := o.mk(i, true)
	c.mu.Lock()
	if c.state != stateRunning || o.ctx.Err() != nil {
		c.mu.Unlock()
		o.releaseLease(i)
		return false
	}
	rt.initContexts()
	rt.start()
	c.handlers = append(c.handlers, rt)
	c.mu.Unlock()
	o.mu.Lock()
	o.owned[i] = &ownedPart{rt: rt, renewedAt: sent, released: make(chan struct{})}
	o.mu.Unlock()
	rt.log.Info("stream: partition taken")
	return true
}

// renew extends the owned leases; a lease lost or too long unrenewed is fenced.
func (o *ownerSet) renew(ctx context.Context, ttl string) {
	c := o.c
	o.mu.Lock()
	parts := make([]int, 0, len(o.owned))
	for i := range o.owned {
		parts = append(parts, i)
	}
	o.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	execs := make([]rueidis.LuaExec, len(parts))
	for k, i := range parts {
		execs[k] = rueidis.LuaExec{Keys: []string{o.leases[i]}, Args: []string{c.name, ttl}}
	}
	sent := time.Now()
	res := ownerRenewScript.ExecMulti(ctx, c.client, execs...)
	var failed error
	for k, i := range parts {
		n, err := res[k].AsInt64()
		o.mu.Lock()
		p := o.owned[i]
		switch {
		case p == nil:
		case err == nil && n == 1:
			p.renewedAt = sent
		case err == nil:
			o.mu.Unlock()
			o.fence(i, "the lease was taken by another consumer or expired")
			continue
		default:
			failed = err
			if time.Since(p.renewedAt) > o.ttl/2 {
				o.mu.Unlock()
				o.fence(i, "the lease could not be renewed for half its time to live")
				continue
			}
		}
		o.mu.Unlock()
	}
	if failed != nil {
		o.fail(&o.renewState, "stream: partition lease renewals fail", failed)
	} else {
		o.renewState.ok(o.log, "stream: partition lease renewals work again")
	}
}

// fence gives partition i up at once: its runtime stops reading and handling, its context
// is cancelled and it acknowledges nothing more (its entries stay pending for the next
// owner).
func (o *ownerSet) fence(i int, why string) {
	o.mu.Lock()
	p := o.owned[i]
	delete(o.owned, i)
	o.mu.Unlock()
	if p == nil {
		return
	}
	rt := p.rt
	rt.fence()
	o.c.removeHandler(rt)
	rt.stopReading()
	rt.cut()
	rt.m.leaseLost.Inc()
	rt.log.Warn("stream: partition lost; its handling stopped", "reason", why)
}

// release drains partition i, then deletes its lease.
func (o *ownerSet) release(i int) {
	o.mu.Lock()
	p := o.owned[i]
	o.mu.Unlock()
	if p == nil {
		return
	}
	defer close(p.released)
	o.c.removeHandler(p.rt)
	err := o.c.stopHandler(context.Background(), p.rt)
	o.mu.Lock()
	if o.owned[i] != p { // fenced meanwhile
		o.mu.Unlock()
		return
	}
	delete(o.owned, i)
	o.mu.Unlock()
	if err != nil {
		p.rt.log.Warn("stream: partition released after a cut-short drain", "error", err)
	}
	o.releaseLease(i)
	p.rt.log.Info("stream: partition released")
}

// releaseLease deletes the lease of partition i if this consumer holds it.
func (o *ownerSet) releaseLease(i int) {
	c := o.c
	ctx, cancel := c.ioContext(context.Background())
	defer cancel()
	if err := ownerReleaseScript.Exec(ctx, c.client, []string{o.leases[i]}, []string{c.name}).Error(); err != nil {
		o.fail(&o.releaseState, "stream: partition releases fail; the leases expire by themselves", err)
	}
}

// exit ends the coordinator: on Close the consumer drains the partitions; on Unregister the
// coordinator does. Then the leases are released and the member leaves.
func (o *ownerSet) exit() {
	c := o.c
	o.mu.Lock()
	parts := make(map[int]*ownedPart, len(o.owned))
	for i, p := range o.owned {
		parts[i] = p
	}
	o.mu.Unlock()
	closing := c.runCtx.Err() != nil
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case p.releasing:
				<-p.released
				return
			case closing:
				<-p.rt.done()
			default:
				c.removeHandler(p.rt)
				_ = c.stopHandler(context.Background(), p.rt)
			}
			if !p.rt.isFenced() {
				o.releaseLease(i)
			}
		}()
	}
	wg.Wait()
	ctx, cancel := c.ioContext(context.Background())
	defer cancel()
	ttl := strconv.FormatInt(o.ttl.Milliseconds(), 10)
	_ = membersBeatScript.Exec(ctx, c.client, []string{o.members}, []string{c.name, ttl, "1"}).Error()
}

// removeHandler takes h out of c's handlers (a partition given up).
func (c *Consumer) removeHandler(h *handlerRT) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range c.handlers {
		if o == h {
			c.handlers = append(c.handlers[:i:i], c.handlers[i+1:]...)
			return
		}
	}
}
