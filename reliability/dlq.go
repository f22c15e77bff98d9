package reliability

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redstream-go/redstream"
)

// FailedElement is an element whose processing failed, with the error and the context of the
// failure. It is a plain value.
type FailedElement[T any] struct {
	// Element is the element that failed.
	Element T
	// Err is the last error (nil if the caller recorded none).
	Err error
	// Timestamp is when the failure was recorded.
	Timestamp time.Time
	// AttemptCount is how many times processing was tried.
	AttemptCount int
	// Stack is the call stack where the failure was recorded, as text (one "function\n\t
	// file:line\n" pair per frame, innermost first, frames of this package left out); empty
	// when Err is nil.
	Stack string
}

// newFailedElement records element's failure now, capturing the caller's stack when err is
// not nil.
func newFailedElement[T any](element T, err error, attempts int) FailedElement[T] {
	fe := FailedElement[T]{Element: element, Err: err, Timestamp: time.Now(), AttemptCount: attempts}
	if err != nil {
		fe.Stack = captureStack()
	}
	return fe
}

const pkgPrefix = "github.com/redstream-go/redstream/reliability."

// captureStack formats the caller's stack, leaving out this package's own frames.
func captureStack() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, pkgPrefix) {
			b.WriteString(f.Function)
			b.WriteString("\n\t")
			b.WriteString(f.File)
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(f.Line))
			b.WriteByte('\n')
		}
		if !more {
			break
		}
	}
	return b.String()
}

// DeadLetterQueue is a FIFO queue of failed elements held in memory, optionally bounded.
// The zero value is an empty, unbounded queue ready to use; [NewDeadLetterQueue] makes a
// bounded one. Add never lets the queue grow past its bound, under any concurrency.
//
// A DeadLetterQueue is safe for concurrent use. It must not be copied after first use. Its
// contents are lost when the process exits.
type DeadLetterQueue[T any] struct {
	mu   sync.Mutex
	max  int // 0: unbounded
	buf  []FailedElement[T]
	head int // buf[head:] is the queue
}

// NewDeadLetterQueue returns an empty queue holding at most maxSize elements. maxSize must be
// > 0; otherwise the error wraps redstream.ErrInvalidConfig.
func NewDeadLetterQueue[T any](maxSize int) (*DeadLetterQueue[T], error) {
	if maxSize <= 0 {
		return nil, fmt.Errorf("reliability: %w: DeadLetterQueue maxSize = %d, want > 0", redstream.ErrInvalidConfig, maxSize)
	}
	return &DeadLetterQueue[T]{max: maxSize}, nil
}

// Add records element's failure now, after attempts tries, with err and the caller's call
// stack (FailedElement.Stack), and queues it. It returns false, queuing nothing, when the
// queue is full.
func (q *DeadLetterQueue[T]) Add(element T, err error, attempts int) bool {
	return q.add(newFailedElement(element, err, attempts))
}

// add queues fe. It returns false, queuing nothing, when the queue is full.
func (q *DeadLetterQueue[T]) add(fe FailedElement[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.max > 0 && len(q.buf)-q.head >= q.max {
		return false
	}
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		// Reuse the polled prefix instead of growing.
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf = q.buf[:n]
		q.head = 0
	}
	q.buf = append(q.buf, fe)
	return true
}

// Poll removes and returns the oldest element; ok is false when the queue is empty.
func (q *DeadLetterQueue[T]) Poll() (fe FailedElement[T], ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.buf) {
		return fe, false
	}
	fe = q.buf[q.head]
	q.buf[q.head] = FailedElement[T]{}
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return fe, true
}

// Peek returns the oldest element without removing it; ok is false when the queue is empty.
func (q *DeadLetterQueue[T]) Peek() (fe FailedElement[T], ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.buf) {
		return fe, false
	}
	return q.buf[q.head], true
}

// All returns a copy of the queued elements, oldest first.
func (q *DeadLetterQueue[T]) All() []FailedElement[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]FailedElement[T](nil), q.buf[q.head:]...)
}

// Len returns the number of queued elements.
func (q *DeadLetterQueue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.buf) - q.head
}

// Clear removes every element and returns how many it removed.
func (q *DeadLetterQueue[T]) Clear() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.buf) - q.head
	clear(q.buf)
	q.buf, q.head = q.buf[:0], 0
	return n
}

// MaxSize returns the bound, or math.MaxInt for an unbounded queue.
func (q *DeadLetterQueue[T]) MaxSize() int {
	if q.max == 0 {
		return math.MaxInt
	}
	return q.max
}
