package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redstream-go/redstream"
)

// Delivery is what consumer middleware sees of one delivered message, whatever its body
// type: the envelope, the headers and the delivery count. Message is the *Message[T] the
// handler receives (type-assert it to reach the body). Headers is the message's own map,
// nil when the entry has none: middleware that adds a header for the code inside it sets
// a new map (on both d.Headers and the message) rather than writing to a nil one.
type Delivery struct {
	// ID, Topic, Group and Consumer are the message's delivery fields.
	ID, Topic, Group, Consumer string
	// Partition is the topic's partition the message was read from (0 when unpartitioned).
	Partition int
	// Key, Tag and Source are the message's envelope.
	Key, Tag, Source string
	// SendTime is the producer's send time (millisecond precision).
	SendTime time.Time
	// DeliveryCount is 1 on the first delivery and grows with each redelivery.
	DeliveryCount int64
	// Headers are the message's headers (nil when it has none).
	Headers map[string]string
	// Message is the *Message[T] passed to Handler.Handle.
	Message any
}

// HandleFunc handles one delivery: the shape middleware wraps. The innermost HandleFunc
// calls Handler.Handle with the ctx it is given, so middleware can hand the handler a
// derived context (a span, a deadline, a logger).
type HandleFunc func(ctx context.Context, d *Delivery) error

// Middleware wraps the handle call of a consumer: it returns a HandleFunc that may act
// before and after calling next, change the ctx it passes on, or not call next at all (the
// error it returns is the delivery's outcome: nil acknowledges, an error is a failure).
//
// Order: the middleware given to Consumer.Use wrap those of Handler.Middleware, which wrap
// Handle; within each list the first is the outermost. Around the whole chain sit the
// consumer's own steps: the Handler.Timeout deadline on ctx (so every middleware sees it)
// and a last-resort recover that turns a panic anywhere in the chain into a failure with
// the same error as Recover. Filter runs before the chain (a filtered message never reaches
// it); OnSuccess and OnFailure run after it, with its outcome.
type Middleware func(next HandleFunc) HandleFunc

// chain composes mws around h: mws[0] is the outermost.
func chain(h HandleFunc, mws ...[]Middleware) HandleFunc {
	for i := len(mws) - 1; i >= 0; i-- {
		for j := len(mws[i]) - 1; j >= 0; j-- {
			if mws[i][j] != nil {
				h = mws[i][j](h)
			}
		}
	}
	return h
}

// Use adds consumer-wide middleware, wrapping every handler registered after the call (a
// handler keeps the chain it was registered with). See Middleware for the order. It is
// safe for concurrent use.
func (c *Consumer) Use(mw ...Middleware) {
	c.mu.Lock()
	c.mw = append(c.mw[:len(c.mw):len(c.mw)], mw...)
	c.mu.Unlock()
}

// maxStackBytes bounds the stack kept in a PanicError (and so in a dead-letter reason).
const maxStackBytes = 8 << 10

// PanicError is the failure of a delivery whose handler (or middleware) panicked: the
// panic value and the goroutine's stack, at most 8 KiB of it. Its Error is one line,
// "stream: handler panicked: <value>"; the dead letter records that line followed by the
// stack. A panic is an ordinary failure: it is retried like an error.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine (debug.Stack), truncated.
	Stack []byte
}

// Error returns "stream: handler panicked: <value>", with the value's line breaks replaced
// by spaces; Stack holds the stack.
func (e *PanicError) Error() string {
	return "stream: handler panicked: " + e.valueString()
}

// valueString is the panic value as one line.
func (e *PanicError) valueString() string {
	return strings.ReplaceAll(fmt.Sprint(e.Value), "\n", " ")
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

func newPanicError(v any) *PanicError {
	s := debug.Stack()
	if len(s) > maxStackBytes {
		s = append(s[:maxStackBytes:maxStackBytes], "\n... (stack truncated)"...)
	}
	return &PanicError{Value: v, Stack: s}
}

// Recover returns middleware that turns a panic in the middleware and handler inside it
// into a *PanicError failure (retried, then dead-lettered with the stack in its reason).
// The consumer recovers panics anyway, around the whole chain; put Recover where the
// middleware outside it (Logging, tracing) should see a panic as an error.
func Recover() Middleware {
	return func(next HandleFunc) HandleFunc {
		return func(ctx context.Context, d *Delivery) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = newPanicError(r)
				}
			}()
			return next(ctx, d)
		}
	}
}

// Timeout returns middleware that cancels the ctx of the middleware and handler inside it
// after d: an error they return then is wrapped in an error matching ErrHandlerTimeout and
// counted as a timeout, exactly as Handler.Timeout does (a handler that returns nil late
// has succeeded). Handler.Timeout bounds the whole chain; Timeout bounds its inner part, so
// that, for example, a retry middleware outside it can give each attempt its own deadline.
// d <= 0 means no timeout.
func Timeout(d time.Duration) Middleware {
	return func(next HandleFunc) HandleFunc {
		if d <= 0 {
			return next
		}
		return func(ctx context.Context, dl *Delivery) error {
			tctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			err := next(tctx, dl)
			if err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && !errors.Is(err, ErrHandlerTimeout) {
				err = &handlerTimeoutError{timeout: d, err: err}
			}
			return err
		}
	}
}

// Logging returns middleware that logs each delivery's outcome to l (slog.Default() when
// nil): at Debug "stream: handled" on success, at Warn "stream: handle failed" with the
// error on failure, both with topic, group, id, key, deliveries and the duration in
// seconds. Put it outside Recover to log panics as failures.
func Logging(l *slog.Logger) Middleware {
	return func(next HandleFunc) HandleFunc {
		return func(ctx context.Context, d *Delivery) error {
			log := l
			if log == nil {
				log = slog.Default()
			}
			start := time.Now()
			err := next(ctx, d)
			attrs := []slog.Attr{
				slog.String("topic", d.Topic), slog.String("group", d.Group), slog.String("id", d.ID),
				slog.String("key", d.Key), slog.Int64("deliveries", d.DeliveryCount),
				slog.Float64("duration_seconds", time.Since(start).Seconds()),
			}
			if err != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "stream: handle failed", append(attrs, slog.Any("error", err))...)
			} else {
				log.LogAttrs(ctx, slog.LevelDebug, "stream: handled", attrs...)
			}
			return err
		}
	}
}

// errDuplicate is the outcome of a delivery Handler.Dedup skipped.
var errDuplicate = errors.New("stream: duplicate key")

// dedup wraps call with Handler.Dedup's check and record.
func (h *handlerRT) dedup(d redstream.Deduplicator, call HandleFunc) HandleFunc {
	return func(ctx context.Context, dl *Delivery) error {
		if dl.Key == "" {
			return call(ctx, dl)
		}
		cctx, cancel := h.c.ioContext(ctx)
		dup, err := d.IsDuplicate(cctx, dl.Key)
		cancel()
		if err != nil {
			return fmt.Errorf("stream: Dedup: check key %q: %w", dl.Key, err)
		}
		if dup {
			return errDuplicate
		}
		if err := call(ctx, dl); err != nil {
			return err
		}
		cctx, cancel = h.c.ioContext(ctx)
		err = d.MarkSeen(cctx, dl.Key)
		cancel()
		if err != nil {
			err = fmt.Errorf("stream: Dedup: record key %q of %s (handled; a later duplicate may be handled too): %w", dl.Key, dl.ID, err)
			h.log.Warn("stream: Dedup could not record a handled message", "id", dl.ID, "error", err)
			h.c.report(err)
		}
		return nil
	}
}
