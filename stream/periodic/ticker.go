package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	vm "github.com/redstream-go/redstream/metrics"
)

// tickFormat is the format of the tick header: RFC 3339 in UTC, to the millisecond.
const tickFormat = "2006-01-02T15:04:05.000Z07:00"

// Headers of every tick's message.
const (
	headerSchedule = streamwire.HeaderPrefix + "redstream-schedule"
	headerTick     = streamwire.HeaderPrefix + "redstream-tick"
)

// tsValueAt is the position, among a tick entry's fields, of the ts value (fire.lua's ARGV[6]).
const tsValueAt = "10"

// maxBackoff is the longest wait after failed calls before the ticker tries again.
const maxBackoff = time.Second

// tickerMetrics are the metrics of one schedule in this process.
type tickerMetrics struct {
	sent, skipped, errors *vm.Counter
}

func newTickerMetrics(set *vm.Set, topic, name string) tickerMetrics {
	l := []string{"topic", topic, "schedule", name}
	return tickerMetrics{
		sent:    set.GetOrCreateCounter(vm.Name(metricSent, l...)),
		skipped: set.GetOrCreateCounter(vm.Name(metricSkipped, l...)),
		errors:  set.GetOrCreateCounter(vm.Name(metricErrors, l...)),
	}
}

// ticker is the role that delivers one schedule's ticks from this process: it plans the
// due ticks from the last decided one, and decides each with fire.lua, which sends it only
// when no process decided it before.
type ticker struct {
	client     rueidis.Client
	c          compiled
	stream     string // the topic's stream key
	schedules  string // the topic's schedules hash
	state      string // the schedule's state hash
	timeout    time.Duration
	log        *slog.Logger
	m          tickerMetrics
	failing    bool // the last call failed (logged once per change)
	failures   int  // calls failed in a row
	failedAt   time.Time
	cancel     context.CancelFunc
	done       chan struct{}
	stopOnce   sync.Once
	startedRun bool
}

// newTicker returns the ticker of schedule c on stream; nothing runs until start.
func newTicker(client rueidis.Client, c compiled, stream string, timeout time.Duration, log *slog.Logger, m tickerMetrics) *ticker {
	schedules, state := streamwire.PeriodicKeys(stream, c.Name)
	return &ticker{client: client, c: c, stream: stream, schedules: schedules, state: state, timeout: timeout,
		log: log.With("topic", c.Topic, "schedule", c.Name), m: m, done: make(chan struct{})}
}

// start runs the ticker until stop.
func (t *ticker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.startedRun = cancel, true
	go func() { defer close(t.done); t.run(ctx) }()
}

// stop ends the ticker and waits for it, at most until ctx ends. A call in flight ends at
// its deadline.
func (t *ticker) stop(ctx context.Context) error {
	if !t.startedRun {
		return nil
	}
	t.stopOnce.Do(t.cancel)
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("periodic: stop schedule %q: %w", t.c.Name, ctx.Err())
	}
}

// run delivers ticks until ctx ends or the schedule is removed. Failed calls are counted,
// logged once per change of state, and tried again after a backoff (50 ms doubling to 1 s).
func (t *ticker) run(ctx context.Context) {
	cursor, ok := t.load(ctx)
	if !ok {
		return
	}
	for ctx.Err() == nil {
		calls := plan(t.c, cursor, time.Now())
		if len(calls) == 0 {
			next := t.c.series.next(cursor)
			if next.IsZero() {
				t.log.Info("periodic: schedule has no more ticks")
				return
			}
			sleep(ctx, time.Until(next))
			continue
		}
		for _, c := range calls {
			r, err := t.fire(ctx, cursor, c)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				t.fail(err)
				sleep(ctx, backoff(t.failures))
				break
			}
			t.ok()
			if r.status == "removed" {
				t.log.Warn("periodic: schedule removed from Redis; this process stops delivering it")
				return
			}
			if c.skipped > 0 && (r.status == "sent" || r.status == "skipped") {
				t.m.skipped.Add(int(c.skipped))
			}
			if r.status == "sent" {
				t.m.sent.Inc()
			}
			if r.status == "taken" {
				cursor = maxTime(cursor, r.last)
				break // another process decided ticks after cursor: plan again from its last
			}
			cursor = c.tick
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// load returns the schedule's last decided tick, or now for a schedule never decided, trying
// again until it can read it or ctx ends.
func (t *ticker) load(ctx context.Context) (time.Time, bool) {
	for {
		cctx, cancel := context.WithTimeout(ctx, t.timeout)
		ms, err := t.client.Do(cctx, t.client.B().Hget().Key(t.state).Field("last").Build()).AsInt64()
		cancel()
		if ctx.Err() != nil {
			return time.Time{}, false
		}
		switch {
		case rueidis.IsRedisNil(err):
			t.ok()
			return time.Now(), true
		case err == nil:
			t.ok()
			return time.UnixMilli(ms), true
		}
		t.fail(err)
		sleep(ctx, backoff(t.failures))
	}
}

// fireReply is fire.lua's reply.
type fireReply struct {
	status string
	last   time.Time
}

// fire runs fire.lua for c planned from cursor, with the ticker's deadline.
func (t *ticker) fire(ctx context.Context, cursor time.Time, c call) (fireReply, error) {
	ms := strconv.FormatInt(c.tick.UnixMilli(), 10)
	args := []string{t.c.Name, strconv.FormatInt(cursor.UnixMilli(), 10), ms, strconv.FormatInt(c.skipped, 10), "0", "0"}
	if c.send {
		args[4], args[5] = "1", tsValueAt
		if c.late {
			args[4] = "2"
		}
		args = append(args,
			streamwire.FieldKey, t.c.Name+"@"+ms,
			streamwire.FieldTag, t.c.Tag,
			streamwire.FieldEnc, streamwire.EncPlain,
			streamwire.FieldBody, string(t.c.Body),
			streamwire.FieldTS, "",
			headerSchedule, t.c.Name,
			headerTick, c.tick.UTC().Format(tickFormat))
	}
	// Stopping does not cancel a call in flight: a canceled call may still run on the server
	// after the client gave up on it, and a tick sent after Stop returned would be neither
	// counted nor expected. The call ends at its deadline.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
	defer cancel()
	vals, err := fireScript.Exec(cctx, t.client, []string{t.state, t.schedules, t.stream}, args).ToArray()
	if err != nil {
		return fireReply{}, err
	}
	if len(vals) != 3 {
		return fireReply{}, fmt.Errorf("periodic: fire.lua replied %d values, want 3", len(vals))
	}
	status, err1 := vals[0].ToString()
	last, err2 := vals[1].ToString()
	lastMs, err3 := strconv.ParseInt(last, 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fireReply{}, fmt.Errorf("periodic: fire.lua reply: %w", err)
	}
	return fireReply{status: status, last: time.UnixMilli(lastMs)}, nil
}

// fail counts a failed call and logs the first of a run at Warn.
func (t *ticker) fail(err error) {
	t.m.errors.Inc()
	t.failures++
	if !t.failing {
		t.failing, t.failedAt = true, time.Now()
		t.log.Warn("periodic: delivering the schedule's ticks fails; they wait (the missed-tick policy applies after)", "error", err)
	}
}

// ok records a working call and logs the first after failures at Info.
func (t *ticker) ok() {
	if t.failing {
		t.log.Info("periodic: delivering the schedule's ticks works again",
			"failures", t.failures, "after", time.Since(t.failedAt).Round(time.Millisecond))
	}
	t.failing, t.failures = false, 0
}

// backoff returns the wait after n failed calls in a row: 50 ms doubling to 1 s.
func backoff(n int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

func maxTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.After(m) {
			m = t
		}
	}
	return m
}
