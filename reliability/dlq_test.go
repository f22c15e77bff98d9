package reliability_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/reliability"
)

func TestNewDeadLetterQueueSize(t *testing.T) {
	for _, size := range []int{0, -1, math.MinInt} {
		if _, err := reliability.NewDeadLetterQueue[string](size); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("NewDeadLetterQueue(%d) error = %v, want ErrInvalidConfig", size, err)
		}
	}
	q, err := reliability.NewDeadLetterQueue[string](2)
	if err != nil || q.MaxSize() != 2 {
		t.Fatalf("NewDeadLetterQueue(2) = %v, %v", q, err)
	}
	var unbounded reliability.DeadLetterQueue[string]
	if unbounded.MaxSize() != math.MaxInt {
		t.Errorf("zero value MaxSize() = %d, want math.MaxInt", unbounded.MaxSize())
	}
}

func TestDeadLetterQueueOperations(t *testing.T) {
	q, _ := reliability.NewDeadLetterQueue[string](2)
	boom := errors.New("boom")
	if !(q.Len() == 0) || (q.Len() == q.MaxSize()) || q.Len() != 0 {
		t.Fatalf("new queue: IsEmpty %v IsFull %v Len %d", (q.Len() == 0), (q.Len() == q.MaxSize()), q.Len())
	}
	if _, ok := q.Poll(); ok {
		t.Errorf("Poll on an empty queue reported an element")
	}
	if _, ok := q.Peek(); ok {
		t.Errorf("Peek on an empty queue reported an element")
	}
	if !q.Add("a", boom, 1) || !q.Add("b", nil, 2) {
		t.Fatal("Add below the bound returned false")
	}
	if q.Add("c", boom, 3) {
		t.Errorf("Add on a full queue returned true")
	}
	if !(q.Len() == q.MaxSize()) || q.Len() != 2 {
		t.Errorf("IsFull = %v, Len = %d; want true, 2", (q.Len() == q.MaxSize()), q.Len())
	}
	if fe, ok := q.Peek(); !ok || fe.Element != "a" || q.Len() != 2 {
		t.Errorf("Peek = %q, %v (Len %d); want a, true (Len 2)", fe.Element, ok, q.Len())
	}
	all := q.All()
	if len(all) != 2 || all[0].Element != "a" || all[1].Element != "b" || all[1].AttemptCount != 2 {
		t.Errorf("All() = %+v", all)
	}
	all[0].Element = "changed"
	if fe, _ := q.Peek(); fe.Element != "a" {
		t.Errorf("All() returned the queue's storage, not a copy")
	}
	fe, ok := q.Poll()
	if !ok || fe.Element != "a" || !errors.Is(fe.Err, boom) || fe.AttemptCount != 1 || fe.Timestamp.IsZero() {
		t.Errorf("Poll() = %+v, %v", fe, ok)
	}
	if (q.Len() == q.MaxSize()) || !q.Add("c", boom, 3) {
		t.Errorf("after a Poll the queue must accept one more")
	}
	if n := q.Clear(); n != 2 || !(q.Len() == 0) {
		t.Errorf("Clear() = %d, IsEmpty = %v; want 2, true", n, (q.Len() == 0))
	}
}

func TestDeadLetterQueueFIFO(t *testing.T) {
	// Interleave adds and polls so the internal buffer wraps and compacts many times, and
	// compare with a plain slice.
	var q reliability.DeadLetterQueue[int]
	var ref []int
	next := 0
	for round := range 2000 {
		for range round%7 + 1 {
			q.Add(next, nil, 0)
			ref = append(ref, next)
			next++
		}
		for range round%5 + 1 {
			fe, ok := q.Poll()
			if ok != (len(ref) > 0) {
				t.Fatalf("round %d: Poll ok = %v with %d queued", round, ok, len(ref))
			}
			if ok {
				if fe.Element != ref[0] {
					t.Fatalf("round %d: Poll = %d, want %d", round, fe.Element, ref[0])
				}
				ref = ref[1:]
			}
		}
		if q.Len() != len(ref) {
			t.Fatalf("round %d: Len = %d, want %d", round, q.Len(), len(ref))
		}
	}
}

func TestDeadLetterQueueHammer(t *testing.T) {
	const bound, workers, perWorker = 64, 16, 2000
	q, _ := reliability.NewDeadLetterQueue[int](bound)
	var added, polled atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				switch {
				case i%3 == 2:
					if _, ok := q.Poll(); ok {
						polled.Add(1)
					}
				case i%97 == 0:
					polled.Add(int64(q.Clear()))
				default:
					if q.Add(w*perWorker+i, nil, 1) {
						added.Add(1)
					}
				}
				if n := q.Len(); n > bound {
					t.Errorf("Len() = %d exceeds the bound %d", n, bound)
					return
				}
			}
		})
	}
	wg.Wait()
	if got, want := int64(q.Len()), added.Load()-polled.Load(); got != want {
		t.Errorf("Len() = %d, want added-removed = %d", got, want)
	}
	if added.Load() <= bound {
		t.Errorf("only %d adds succeeded: the hammer never filled the queue", added.Load())
	}
}

type emptyErr struct{}

func (emptyErr) Error() string { return "" }

func TestFailedElement(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		stack bool
	}{
		{"with error", errors.New("boom"), true},
		{"nil error", nil, false},
		{"empty message", emptyErr{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q reliability.DeadLetterQueue[string]
			q.Add("payload", tt.err, 3)
			fe, _ := q.Poll()
			if fe.Err != tt.err || fe.AttemptCount != 3 || fe.Element != "payload" || fe.Timestamp.IsZero() {
				t.Errorf("FailedElement = %+v, want payload, %v, 3 attempts, a timestamp", fe, tt.err)
			}
			if tt.stack != (fe.Stack != "") {
				t.Errorf("Stack = %q, want empty: %v", fe.Stack, !tt.stack)
			}
			if tt.stack && !strings.Contains(fe.Stack, "TestFailedElement") {
				t.Errorf("Stack does not name the caller:\n%s", fe.Stack)
			}
			if strings.Contains(fe.Stack, "redstream/reliability.") {
				t.Errorf("Stack includes the package's own frames:\n%s", fe.Stack)
			}
		})
	}
}
