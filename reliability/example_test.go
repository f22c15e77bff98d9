package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redstream-go/redstream/reliability"
)

func ExampleExecutor_Do() {
	policy := reliability.DefaultPolicy() // 3 retries, 100 ms doubling, capped at 10 s
	policy.InitialDelay = time.Millisecond
	policy.NonRetryable = []reliability.ErrorMatcher{reliability.Is(io.ErrUnexpectedEOF)}
	policy.OnRetry = func(retry int, err error, wait time.Duration) {
		fmt.Printf("retry %d after %v: %v\n", retry, wait, err)
	}
	exec, err := reliability.NewExecutor(policy)
	if err != nil {
		panic(err)
	}

	tries := 0
	err = exec.Do(context.Background(), func(ctx context.Context) error {
		tries++
		if tries < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	fmt.Println("tries:", tries, "err:", err)

	err = exec.Do(context.Background(), func(ctx context.Context) error {
		return fmt.Errorf("decode: %w", io.ErrUnexpectedEOF) // not retried
	})
	fmt.Println("err:", err)
	// Output:
	// retry 1 after 1ms: connection refused
	// retry 2 after 2ms: connection refused
	// tries: 3 err: <nil>
	// err: decode: unexpected EOF
}

func ExampleRetryPolicy_Delay() {
	p := reliability.DefaultPolicy()
	var delays []time.Duration
	for attempt := 0; attempt <= 9; attempt++ {
		delays = append(delays, p.Delay(attempt))
	}
	fmt.Println(delays)
	fmt.Println(reliability.FixedDelay(3, 50*time.Millisecond).Delay(3))
	// Output:
	// [0s 100ms 200ms 400ms 800ms 1.6s 3.2s 6.4s 10s 10s]
	// 50ms
}

func ExampleCall() {
	exec, _ := reliability.NewExecutor(reliability.FixedDelay(2, time.Millisecond))
	n := 0
	v, err := reliability.Call(context.Background(), exec, func(ctx context.Context) (string, error) {
		n++
		if n == 1 {
			return "", errors.New("busy")
		}
		return "success", nil
	})
	fmt.Println(v, err)
	// Output: success <nil>
}

func ExampleProcessor() {
	// Retry each element twice, then keep it in a dead-letter queue of at most 100.
	cfg, err := reliability.WithDeadLetterQueue[string](100)
	if err != nil {
		panic(err)
	}
	policy := reliability.FixedDelay(2, time.Millisecond)
	cfg.RetryPolicy = &policy
	cfg.OnFailure = func(fe reliability.FailedElement[string]) {
		fmt.Printf("failed: %s after %d tries: %v\n", fe.Element, fe.AttemptCount, fe.Err)
	}
	proc, err := reliability.NewProcessor(cfg)
	if err != nil {
		panic(err)
	}

	handle := func(ctx context.Context, order string) error {
		if order == "order-2" {
			return errors.New("payment service down")
		}
		return nil
	}
	for _, order := range []string{"order-1", "order-2", "order-3"} {
		res, err := proc.Process(context.Background(), order, handle)
		fmt.Println(order, res.Outcome, err)
	}
	for _, fe := range cfg.DeadLetterQueue.All() {
		fmt.Println("dead letter:", fe.Element, "after", fe.AttemptCount, "tries")
	}
	// Output:
	// order-1 success <nil>
	// failed: order-2 after 3 tries: payment service down
	// order-2 dead_letter <nil>
	// order-3 success <nil>
	// dead letter: order-2 after 3 tries
}

func ExampleDeadLetterQueue() {
	dlq, err := reliability.NewDeadLetterQueue[string](2)
	if err != nil {
		panic(err)
	}
	fmt.Println(dlq.Add("a", errors.New("boom"), 1))
	fmt.Println(dlq.Add("b", nil, 3))
	fmt.Println(dlq.Add("c", errors.New("boom"), 1)) // full: refused
	fe, _ := dlq.Poll()
	fmt.Println(fe.Element, fe.Err, dlq.Len(), dlq.MaxSize())
	fe, _ = dlq.Poll()
	fmt.Println(fe.Element, fe.Err, fe.Stack == "")
	// Output:
	// true
	// true
	// false
	// a boom 1 2
	// b <nil> true
}
