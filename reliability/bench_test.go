package reliability_test

import (
	"context"
	"testing"

	"github.com/redstream-go/redstream/reliability"
)

var sink int

func work(context.Context) error { sink++; return nil }

// BenchmarkDirect is the baseline for BenchmarkExecutorDo: the same function called directly.
func BenchmarkDirect(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	fn := work
	for b.Loop() {
		if err := fn(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecutorDo measures Do when the function succeeds at once; its overhead is the
// difference with BenchmarkDirect.
func BenchmarkExecutorDo(b *testing.B) {
	b.ReportAllocs()
	e, err := reliability.NewExecutor(reliability.DefaultPolicy())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if err := e.Do(ctx, work); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExecutorDoParallel(b *testing.B) {
	b.ReportAllocs()
	e, _ := reliability.NewExecutor(reliability.DefaultPolicy())
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := e.Do(ctx, func(context.Context) error { return nil }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkProcessorSuccess(b *testing.B) {
	b.ReportAllocs()
	p, _ := reliability.NewProcessor(reliability.NewConfig[string]())
	ctx := context.Background()
	fn := func(context.Context, string) error { return nil }
	for b.Loop() {
		if _, err := p.Process(ctx, "x", fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeadLetterQueueAddPoll(b *testing.B) {
	b.ReportAllocs()
	q, _ := reliability.NewDeadLetterQueue[int](1024)
	for b.Loop() {
		q.Add(1, nil, 1)
		q.Poll()
	}
}
