package periodic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	vm "github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/stream"
)

// Options configures a Scheduler. The zero value means every default.
type Options struct {
	// Stream gives the topics' stream keys: its EnvIsolation, Env and Partitions are read
	// as a Producer reads them. A partitioned topic cannot have schedules.
	Stream stream.Config
	// Timeout is the deadline of each Redis call. 0 means DefaultTimeout (2 s).
	Timeout time.Duration
	// Logger receives the scheduler's logs (a failing schedule once when it starts failing
	// and once when it works again). Nil means slog.Default().
	Logger *slog.Logger
	// Metrics is the set the redis_streaming_periodic_* counters are registered in. Nil
	// means metrics.Stream.
	Metrics *vm.Set
}

// ErrNotFound is returned by Pause, Resume and Remove for a schedule that is not registered.
var ErrNotFound = errors.New("periodic: schedule not found")

// Scheduler delivers the schedules added to it from this process: every process that adds
// the same schedule shares its ticks, each sent once across them. Its methods are safe for
// concurrent use. It does not own its client: Stop leaves it open.
type Scheduler struct {
	client  rueidis.Client
	opts    Options
	mu      sync.Mutex
	tickers map[string]*ticker // by stream key and name
	running bool
	stopped bool
}

// New returns a Scheduler on client. It returns an error wrapping redstream.ErrInvalidConfig
// for a nil client or a negative Options.Timeout.
func New(client rueidis.Client, opts Options) (*Scheduler, error) {
	if client == nil {
		return nil, invalid("New: nil client")
	}
	if opts.Timeout < 0 {
		return nil, invalid("Options.Timeout: %v: want 0 (default %v) or more", opts.Timeout, DefaultTimeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = vm.Stream
	}
	return &Scheduler{client: client, opts: opts, tickers: map[string]*ticker{}}, nil
}

// Add validates sc, registers it in Redis (its definition replaces the one registered
// before under its topic and name, and it is listed from then on) and, once the Scheduler
// has started, starts delivering it. An invalid schedule (a bad cron expression names the
// field at fault) gives an error wrapping redstream.ErrInvalidConfig; a schedule of the
// same topic and name added to this Scheduler before gives one too. The Redis calls have
// Options.Timeout (or ctx's earlier deadline).
func (s *Scheduler) Add(ctx context.Context, sc Schedule) error {
	c, err := compile(sc)
	if err != nil {
		return err
	}
	key, err := s.streamKey(c.Topic)
	if err != nil {
		return err
	}
	id := key + "\x00" + c.Name
	s.mu.Lock()
	_, dup := s.tickers[id]
	stopped := s.stopped
	s.mu.Unlock()
	switch {
	case dup:
		return invalid("Add: schedule %q of topic %q added twice", c.Name, c.Topic)
	case stopped:
		return errors.New("periodic: Add: the scheduler is stopped")
	}
	def, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("periodic: Add %q: %w", c.Name, err)
	}
	schedules, _ := streamwire.PeriodicKeys(key, c.Name)
	cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	b := s.client.B()
	for _, r := range s.client.DoMulti(cctx,
		b.Hset().Key(schedules).FieldValue().FieldValue(c.Name, string(def)).Build(),
		b.Sadd().Key(streamwire.PeriodicIndexKey).Member(key).Build()) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("periodic: Add %q: register: %w", c.Name, err)
		}
	}
	t := newTicker(s.client, c, key, s.opts.Timeout, s.opts.Logger, newTickerMetrics(s.opts.Metrics, c.Topic, c.Name))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch _, dup := s.tickers[id]; {
	case dup:
		return invalid("Add: schedule %q of topic %q added twice", c.Name, c.Topic)
	case s.stopped:
		return errors.New("periodic: Add: the scheduler is stopped (the schedule is registered)")
	}
	s.tickers[id] = t
	if s.running {
		t.start()
	}
	return nil
}

// Start starts delivering the schedules added (and those added later). It returns an error
// when the Scheduler has started before.
func (s *Scheduler) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.stopped {
		return errors.New("periodic: Start: the scheduler has started before")
	}
	s.running = true
	for _, t := range s.tickers {
		t.start()
	}
	return nil
}

// Stop stops delivering and waits for the schedules' goroutines, at most until ctx ends. A
// Redis call in flight is not canceled but ends at its deadline, so once Stop has returned
// nil, nothing this Scheduler decided is still on its way to Redis. A stopped Scheduler cannot start again; its
// List, Pause, Resume and Remove still work. Ticks due while no process delivers a
// schedule are missed ticks (Schedule.Missed).
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped, s.running = true, false
	ts := make([]*ticker, 0, len(s.tickers))
	for _, t := range s.tickers {
		ts = append(ts, t)
	}
	s.mu.Unlock()
	var errs []error
	for _, t := range ts {
		errs = append(errs, t.stop(ctx))
	}
	return errors.Join(errs...)
}

// streamKey returns the stream key of topic, which must not be partitioned.
func (s *Scheduler) streamKey(topic string) (string, error) {
	keys, err := stream.PartitionStreams(s.opts.Stream, topic)
	if err != nil {
		return "", fmt.Errorf("periodic: %w", err)
	}
	if len(keys) != 1 {
		return "", invalid("topic %q: partitioned (%d partitions): schedules need an unpartitioned topic", topic, len(keys))
	}
	return keys[0], nil
}
