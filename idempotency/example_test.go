package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/idempotency"
)

func ExampleIdempotent_Do() {
	// In production: idempotency.NewRedis(client, idempotency.Options{Name: "payments"}).
	payments, err := idempotency.NewMemory(idempotency.Options{Name: "payments", Retention: 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	charge := func(ctx context.Context) ([]byte, error) {
		fmt.Println("charging 10 EUR")
		return []byte("charge ch_1"), nil
	}
	for range 2 { // a client retry: the same key, the same request
		r, err := payments.Do(ctx, "customer-42/key-1", "amount=10&currency=EUR", charge)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s (replayed: %v)\n", r.Value, r.Replayed)
	}
	_, err = payments.Do(ctx, "customer-42/key-1", "amount=99&currency=EUR", charge)
	fmt.Println(errors.Is(err, idempotency.ErrMismatch))
	// Output:
	// charging 10 EUR
	// charge ch_1 (replayed: false)
	// charge ch_1 (replayed: true)
	// true
}
