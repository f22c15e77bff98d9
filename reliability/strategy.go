package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/metrics"
)

// FailureStrategy says what a [Processor] does when processing an element fails. The zero
// value is not a strategy: NewProcessor rejects it.
type FailureStrategy int

// The strategies, named as in the Java system.
const (
	// StrategyFailFast tries once and returns the error.
	StrategyFailFast FailureStrategy = iota + 1
	// StrategyRetry retries under Config.RetryPolicy, then returns the last error.
	StrategyRetry
	// StrategySkip tries once; on failure it records the failure and skips the element
	// (Process returns nil).
	StrategySkip
	// StrategyDeadLetterQueue retries under Config.RetryPolicy when one is set, then adds
	// the element to Config.DeadLetterQueue (Process returns nil, or an error wrapping
	// ErrDeadLetterQueueFull when the queue is full).
	StrategyDeadLetterQueue
	// StrategyIgnore tries once and ignores a failure as if the element had succeeded: no
	// callback, no failure counted.
	StrategyIgnore
)

var strategyNames = [...]string{"", "FAIL_FAST", "RETRY", "SKIP", "DEAD_LETTER_QUEUE", "IGNORE"}

// String returns the Java name: FAIL_FAST, RETRY, SKIP, DEAD_LETTER_QUEUE or IGNORE.
func (s FailureStrategy) String() string {
	if s > 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("FailureStrategy(%d)", int(s))
}

// parseFailureStrategy parses a strategy name, ignoring case, '-' and '_': "FAIL_FAST",
// "fail-fast" and "failFast" are the same. "DLQ" and "dead-letter" name
// StrategyDeadLetterQueue.
func parseFailureStrategy(s string) (FailureStrategy, error) {
	n := strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(s))
	switch n {
	case "failfast":
		return StrategyFailFast, nil
	case "retry":
		return StrategyRetry, nil
	case "skip":
		return StrategySkip, nil
	case "deadletterqueue", "deadletter", "dlq":
		return StrategyDeadLetterQueue, nil
	case "ignore":
		return StrategyIgnore, nil
	}
	return 0, fmt.Errorf("reliability: %w: unknown failure strategy %q", redstream.ErrInvalidConfig, s)
}

// defaultMaxConsecutiveFailures is Config.MaxConsecutiveFailures in NewConfig.
const defaultMaxConsecutiveFailures = 10

// Errors of a Processor.
var (
	// ErrStopped is returned by Process, without running the function, once the processor
	// has stopped (after a failure with ContinueOnFailure unset, or after
	// MaxConsecutiveFailures); Reset resumes it.
	ErrStopped = errors.New("reliability: processor stopped")
	// ErrTooManyFailures is wrapped by the error of the failure that brought the
	// consecutive failures to MaxConsecutiveFailures.
	ErrTooManyFailures = errors.New("reliability: too many consecutive failures")
	// ErrDeadLetterQueueFull is wrapped by Process's error when StrategyDeadLetterQueue
	// could not queue a failed element.
	ErrDeadLetterQueueFull = errors.New("reliability: dead-letter queue full")
)

// Config configures failure handling for a stream of elements of type T. Build one with
// [NewConfig] or [WithDeadLetterQueue] and adjust fields (for example Strategy =
// StrategyFailFast and ContinueOnFailure = false to stop at the first failure); the zero
// value is invalid (no strategy). It is a plain value; the DeadLetterQueue it points to is
// shared by copies.
type Config[T any] struct {
	// Strategy is the failure strategy (required).
	Strategy FailureStrategy
	// RetryPolicy is required by StrategyRetry and optional for StrategyDeadLetterQueue
	// (retry first, then dead-letter); other strategies ignore it.
	RetryPolicy *RetryPolicy
	// DeadLetterQueue receives failed elements; required by StrategyDeadLetterQueue.
	DeadLetterQueue *DeadLetterQueue[T]
	// OnFailure, if set, is called with every failure that is not ignored (for logs and
	// metrics), before Process returns.
	OnFailure func(FailedElement[T])
	// ContinueOnFailure keeps the processor running after a failure. When false, the
	// first failure stops it (Process then returns ErrStopped until Reset).
	ContinueOnFailure bool
	// MaxConsecutiveFailures stops the processor after this many failures in a row; > 0.
	MaxConsecutiveFailures int
	// Name, when set, labels the processor's counters in metrics.Reliability
	// (redis_streaming_reliability_outcomes_total{name,outcome},
	// redis_streaming_reliability_retries_total{name} and
	// redis_streaming_reliability_dlq_dropped_total{name}).
	Name string
}

// NewConfig returns the defaults of the Java system: StrategyRetry with DefaultPolicy,
// ContinueOnFailure, MaxConsecutiveFailures 10.
func NewConfig[T any]() Config[T] {
	p := DefaultPolicy()
	return Config[T]{
		Strategy:               StrategyRetry,
		RetryPolicy:            &p,
		ContinueOnFailure:      true,
		MaxConsecutiveFailures: defaultMaxConsecutiveFailures,
	}
}

// WithDeadLetterQueue returns NewConfig with StrategyDeadLetterQueue and a new queue of
// queueSize elements (failed elements are retried under DefaultPolicy first; set
// RetryPolicy to nil to dead-letter at the first failure). queueSize must be > 0.
func WithDeadLetterQueue[T any](queueSize int) (Config[T], error) {
	q, err := NewDeadLetterQueue[T](queueSize)
	if err != nil {
		return Config[T]{}, err
	}
	c := NewConfig[T]()
	c.Strategy = StrategyDeadLetterQueue
	c.DeadLetterQueue = q
	return c, nil
}

// validate checks the Java system's four rules: a strategy is set, StrategyRetry has a
// RetryPolicy, StrategyDeadLetterQueue has a DeadLetterQueue, MaxConsecutiveFailures > 0;
// and that a RetryPolicy that will be used is valid. Errors wrap redstream.ErrInvalidConfig
// and name the field.
func (c Config[T]) validate() error {
	bad := func(field, msg string) error {
		return fmt.Errorf("reliability: %w: Config.%s %s", redstream.ErrInvalidConfig, field, msg)
	}
	switch c.Strategy {
	case StrategyFailFast, StrategySkip, StrategyIgnore:
	case StrategyRetry:
		if c.RetryPolicy == nil {
			return bad("RetryPolicy", "is required by StrategyRetry")
		}
	case StrategyDeadLetterQueue:
		if c.DeadLetterQueue == nil {
			return bad("DeadLetterQueue", "is required by StrategyDeadLetterQueue")
		}
	case 0:
		return bad("Strategy", "is not set")
	default:
		return bad("Strategy", fmt.Sprintf("= %d is not a strategy", int(c.Strategy)))
	}
	if c.MaxConsecutiveFailures <= 0 {
		return bad("MaxConsecutiveFailures", fmt.Sprintf("= %d, want > 0", c.MaxConsecutiveFailures))
	}
	if c.usesRetry() {
		if err := c.RetryPolicy.validate(); err != nil {
			return fmt.Errorf("reliability: Config.RetryPolicy: %w", err)
		}
	}
	return nil
}

func (c Config[T]) usesRetry() bool {
	return c.RetryPolicy != nil && (c.Strategy == StrategyRetry || c.Strategy == StrategyDeadLetterQueue)
}

// Outcome is what became of one element.
type Outcome int

// The outcomes.
const (
	// OutcomeSuccess: the first try succeeded.
	OutcomeSuccess Outcome = iota
	// OutcomeRetried: a retry succeeded.
	OutcomeRetried
	// OutcomeFailed: the failure was returned (fail fast, retries exhausted, dead-letter
	// queue full).
	OutcomeFailed
	// OutcomeSkipped: the element was skipped (StrategySkip).
	OutcomeSkipped
	// OutcomeDeadLettered: the element went to the dead-letter queue.
	OutcomeDeadLettered
	// OutcomeIgnored: the failure was ignored (StrategyIgnore).
	OutcomeIgnored
	// OutcomeRejected: the processor was stopped or the context was done; the function
	// did not run.
	OutcomeRejected
)

var outcomeNames = [...]string{"success", "retried", "failed", "skipped", "dead_letter", "ignored", "rejected"}

// String returns the outcome's metric label: success, retried, failed, skipped,
// dead_letter, ignored or rejected.
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result describes one Process call.
type Result struct {
	Outcome Outcome
	// Attempts is how many times the function ran.
	Attempts int
	// Err is the function's last error, also when Process returns nil (skipped,
	// dead-lettered, ignored).
	Err error
}

// Processor applies a Config's failure strategy to elements, counting consecutive failures
// across calls. It is safe for concurrent use; under concurrency "consecutive" means in the
// order the failures complete.
type Processor[T any] struct {
	cfg      Config[T]
	exec     *Executor // nil: one try
	failures atomic.Int64
	stopped  atomic.Bool
	outcomes [len(outcomeNames)]*metrics.Counter
	retries  *metrics.Counter
	dropped  *metrics.Counter
}

// NewProcessor returns a processor of cfg. It checks the Java system's four rules: a
// strategy is set, StrategyRetry has a RetryPolicy, StrategyDeadLetterQueue has a
// DeadLetterQueue, MaxConsecutiveFailures > 0; and that a RetryPolicy that will be used is
// valid (see NewExecutor). Errors wrap redstream.ErrInvalidConfig and name the field.
func NewProcessor[T any](cfg Config[T]) (*Processor[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Processor[T]{cfg: cfg}
	if cfg.usesRetry() {
		e, err := NewExecutor(*cfg.RetryPolicy)
		if err != nil {
			return nil, err
		}
		p.exec = e
	}
	if cfg.Name != "" {
		for i := range p.outcomes {
			p.outcomes[i] = metrics.Reliability.GetOrCreateCounter(
				metrics.Name("redis_streaming_reliability_outcomes_total", "name", cfg.Name, "outcome", outcomeNames[i]))
		}
		p.retries = metrics.Reliability.GetOrCreateCounter(metrics.Name("redis_streaming_reliability_retries_total", "name", cfg.Name))
		p.dropped = metrics.Reliability.GetOrCreateCounter(metrics.Name("redis_streaming_reliability_dlq_dropped_total", "name", cfg.Name))
	}
	return p, nil
}

// ConsecutiveFailures returns the current run of failures (0 after a success).
func (p *Processor[T]) ConsecutiveFailures() int { return int(p.failures.Load()) }

// Stopped reports whether the processor has stopped.
func (p *Processor[T]) Stopped() bool { return p.stopped.Load() }

// Reset resumes a stopped processor and zeroes the consecutive failures.
func (p *Processor[T]) Reset() {
	p.failures.Store(0)
	p.stopped.Store(false)
}

// Process runs fn on element and applies the strategy to a failure:
//
//	FailFast         one try; the error is returned
//	Retry            tries under RetryPolicy; the last error is returned
//	Skip             one try; the element is skipped, nil is returned
//	DeadLetterQueue  tries under RetryPolicy (if set); the element is queued, nil is returned
//	                 (ErrDeadLetterQueueFull wrapped with the error when the queue is full)
//	Ignore           one try; the failure is ignored, nil is returned
//
// Every failure but an ignored one calls OnFailure and counts as consecutive; a success (or
// an ignored failure) ends the run. The failure that makes the run reach
// MaxConsecutiveFailures returns an error wrapping ErrTooManyFailures and stops the
// processor, as any failure does without ContinueOnFailure. A stopped processor returns
// ErrStopped without running fn, and so does a done ctx (with an error wrapping ctx.Err(),
// not counted as a failure); a wait between retries cut short by ctx is a failure like any
// other (so StrategyDeadLetterQueue keeps the element). A nil fn is an error wrapping
// redstream.ErrInvalidConfig.
func (p *Processor[T]) Process(ctx context.Context, element T, fn func(ctx context.Context, element T) error) (Result, error) {
	if fn == nil {
		return Result{Outcome: OutcomeRejected}, fmt.Errorf("reliability: Process: %w: nil function", redstream.ErrInvalidConfig)
	}
	if p.stopped.Load() {
		p.count(OutcomeRejected, 0)
		return Result{Outcome: OutcomeRejected}, ErrStopped
	}
	if err := ctx.Err(); err != nil {
		// Cancellation is not a failure of the element: nothing runs, nothing is counted.
		return Result{Outcome: OutcomeRejected}, fmt.Errorf("reliability: not started: %w", err)
	}
	call := func(ctx context.Context) error { return fn(ctx, element) }
	var (
		tries int
		err   error
	)
	if p.exec != nil {
		tries, err = p.exec.do(ctx, call)
	} else {
		tries, err = 1, call(ctx)
	}
	if err == nil {
		p.failures.Store(0)
		o := OutcomeSuccess
		if tries > 1 {
			o = OutcomeRetried
		}
		p.count(o, tries)
		return Result{Outcome: o, Attempts: tries}, nil
	}
	if p.cfg.Strategy == StrategyIgnore {
		p.failures.Store(0)
		p.count(OutcomeIgnored, tries)
		return Result{Outcome: OutcomeIgnored, Attempts: tries, Err: err}, nil
	}

	fe := newFailedElement(element, err, tries)
	res := Result{Outcome: OutcomeFailed, Attempts: tries, Err: err}
	var out error
	switch p.cfg.Strategy {
	case StrategyFailFast, StrategyRetry:
		out = err
	case StrategySkip:
		res.Outcome = OutcomeSkipped
	case StrategyDeadLetterQueue:
		if p.cfg.DeadLetterQueue.add(fe) {
			res.Outcome = OutcomeDeadLettered
		} else {
			out = fmt.Errorf("%w: %w", ErrDeadLetterQueueFull, err)
			if p.dropped != nil {
				p.dropped.Inc()
			}
		}
	}
	run := p.failures.Add(1)
	if p.cfg.OnFailure != nil {
		p.cfg.OnFailure(fe)
	}
	if !p.cfg.ContinueOnFailure {
		p.stopped.Store(true)
	}
	if run >= int64(p.cfg.MaxConsecutiveFailures) {
		p.stopped.Store(true)
		cause := out
		if cause == nil {
			cause = err
		}
		out = fmt.Errorf("%w (%d in a row): %w", ErrTooManyFailures, run, cause)
	}
	p.count(res.Outcome, tries)
	return res, out
}

func (p *Processor[T]) count(o Outcome, tries int) {
	if p.retries == nil {
		return
	}
	p.outcomes[o].Inc()
	if tries > 1 {
		p.retries.Add(tries - 1)
	}
}
