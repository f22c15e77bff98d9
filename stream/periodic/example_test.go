package periodic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/periodic"
)

// embedded returns a client of an embedded Redis (miniredis) and its stop function.
func embedded() (rueidis.Client, func()) {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	return client, func() { client.Close(); srv.Close() }
}

func ExampleScheduler() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// Every instance of the service runs this: each tick is sent once across them.
	s, _ := periodic.New(client, periodic.Options{})
	err := s.Add(ctx, periodic.Schedule{
		Name: "nightly-report", Topic: "reports",
		Cron: "0 30 2 * * *", TimeZone: "Europe/Paris", // 02:30:00 in Paris (seconds first)
		Missed: periodic.MissedOne, // after an outage, send the latest missed night, once
		Body:   json.RawMessage(`{"report":"sales"}`),
	})
	fmt.Println("nightly:", err)
	_ = s.Add(ctx, periodic.Schedule{Name: "heartbeat", Topic: "beats", Every: 100 * time.Millisecond})
	_ = s.Start()
	defer s.Stop(ctx)

	// Any consumer of the topic handles the ticks.
	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	done := make(chan struct{})
	_ = stream.Register(consumer, stream.Handler[map[string]any]{
		Topic: "beats", Group: "monitor",
		Handle: func(ctx context.Context, msg *stream.Message[map[string]any]) error {
			select {
			case <-done:
			default:
				fmt.Println("tick of", msg.Headers["redstream-schedule"], "at a multiple of 100 ms:",
					msg.Headers["redstream-tick"][21:23] == "00")
				close(done)
			}
			return nil
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)
	<-done
	// Output:
	// nightly: <nil>
	// tick of heartbeat at a multiple of 100 ms: true
}

func ExampleScheduler_List() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	s, _ := periodic.New(client, periodic.Options{})
	_ = s.Add(ctx, periodic.Schedule{Name: "cleanup", Topic: "jobs", Cron: "*/15 * * * *", Missed: periodic.MissedAll, MaxCatchUp: 4})
	// List, Pause, Resume and Remove act on the schedules of every process (as does the
	// command `redstream periodic list|pause|resume|remove`).
	_ = s.Pause(ctx, "jobs", "cleanup")
	infos, _ := s.List(ctx, "jobs")
	for _, i := range infos {
		fmt.Println(i.Name, i.Cron, i.Missed, "paused:", i.Paused)
	}
	_ = s.Resume(ctx, "jobs", "cleanup")
	fmt.Println(s.Remove(ctx, "jobs", "cleanup"))
	err := s.Remove(ctx, "jobs", "cleanup")
	fmt.Println(errors.Is(err, periodic.ErrNotFound))
	// Output:
	// cleanup */15 * * * * all paused: true
	// <nil>
	// true
}

func ExampleSchedule_invalid() {
	client, stop := embedded()
	defer stop()
	s, _ := periodic.New(client, periodic.Options{})
	err := s.Add(context.Background(), periodic.Schedule{Name: "bad", Topic: "jobs", Cron: "0 61 * * *"})
	fmt.Println(errors.Is(err, redstream.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// periodic: schedule "bad": Cron: "0 61 * * *": hour field "61": end of range (61) above maximum (23): "61"
}
