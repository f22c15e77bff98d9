package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/stream"
)

type Report struct {
	Month string `json:"month"`
}

func ExampleProducer_WaitResult() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	_ = stream.Register(consumer, stream.Handler[Report]{
		Topic: "reports", Group: "renderer",
		Results: &stream.ResultOptions{TTL: time.Hour}, // record progress and results, kept an hour
		Handle: func(ctx context.Context, msg *stream.Message[Report]) error {
			_ = msg.Progress(ctx, map[string]int{"pages": 3}) // readable while the handler runs
			return msg.SetResult(map[string]string{"url": "/reports/" + msg.Body.Month + ".pdf"})
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, stream.Config{})
	id, _ := producer.Send(ctx, "reports", stream.NewMessage(Report{Month: "2026-11"}))
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := producer.WaitResult(wait, "reports", "renderer", id)
	fmt.Println(res.State, string(res.Value), string(res.Progress), err)
	// Output:
	// completed {"url":"/reports/2026-11.pdf"} {"pages":3} <nil>
}
