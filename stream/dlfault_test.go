package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// TestDeadLetterFault: with the dead-letter stream unwritable (a key of another type, or the
// server at maxmemory with noeviction), messages that must be dead-lettered leave their
// handler slot and wait, pending, while the good messages keep flowing through the one
// handler slot; Healthy says that dead-letter writes fail. Once the fault is fixed every
// doomed message is dead-lettered with its own reason, and OnFailure is told.
func TestDeadLetterFault(t *testing.T) {
	cases := []struct {
		name        string
		dedicated   bool // a server of its own (the fault is server-wide)
		fault, heal func(t *testing.T, c rueidis.Client, dlq string)
	}{
		{
			name: "WRONGTYPE",
			fault: func(t *testing.T, c rueidis.Client, dlq string) {
				mustDo(t, c, c.B().Set().Key(dlq).Value("not a stream").Build())
			},
			heal: func(t *testing.T, c rueidis.Client, dlq string) {
				mustDo(t, c, c.B().Del().Key(dlq).Build())
			},
		},
		{
			name:      "OOM",
			dedicated: true,
			fault: func(t *testing.T, c rueidis.Client, dlq string) {
				mustDo(t, c, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", "noeviction").ParameterValue("maxmemory", "1").Build())
			},
			heal: func(t *testing.T, c rueidis.Client, dlq string) {
				mustDo(t, c, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "0").Build())
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const good, doomed = 20, 20
			client := redistest.Client(t)
			if tc.dedicated {
				client = redistest.NewClient(t, redistest.NewServer(t).Addr)
			}
			ctx := context.Background()
			cfg := fastConfig()
			topic := newTopic(t)
			dlq := streamwire.DeadLetterStreamName(topic)
			mustDo(t, client, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Mkstream().Build())
			p := newProducer(t, client, cfg)
			for i := 0; i < good+doomed; i++ {
				status := "good"
				if i%2 == 0 {
					status = "doomed"
				}
				send(t, p, topic, order{i, status})
			}
			gate := make(chan struct{}) // handlers start once the fault is in place
			var mu sync.Mutex
			handled := map[int]bool{}
			failures := map[int]string{}
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
				Handle: func(ctx context.Context, m *stream.Message[order]) error {
					<-gate
					if m.Body.Status == "doomed" {
						return stream.Permanent(fmt.Errorf("order %d cannot be handled", m.Body.ID))
					}
					mu.Lock()
					handled[m.Body.ID] = true
					mu.Unlock()
					return nil
				},
				OnFailure: func(ctx context.Context, m *stream.Message[order], raw []byte, err error) {
					mu.Lock()
					failures[m.Body.ID] = err.Error()
					mu.Unlock()
				}}); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, c) // before the fault: at maxmemory, creating the group fails
			tc.fault(t, client, dlq)
			healed := false
			defer func() {
				if !healed {
					tc.heal(t, client, dlq)
				}
			}()
			close(gate)
			count := func() int { mu.Lock(); defer mu.Unlock(); return len(handled) }
			deadline := time.Now().Add(10 * time.Second)
			for count() < good && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			during := count()
			t.Logf("%d of %d good messages handled while the dead-letter stream was unwritable", during, good)
			if during < good-1 {
				t.Errorf("%d of %d good messages handled during the fault, want at least %d", during, good, good-1)
			}
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			herr := c.Healthy(hctx)
			cancel()
			if herr == nil || !strings.Contains(herr.Error(), "dead-letter writes") {
				t.Errorf("Healthy during the fault = %v, want the failing dead-letter writes", herr)
			}
			// The good ones are acknowledged (in a batch, just after their handler returned);
			// the doomed ones stay pending until their dead letter is written.
			eventually(t, 5*time.Second, "only the doomed entries pending during the fault", func() bool {
				return pending(t, client, topic, "g") == doomed
			})

			tc.heal(t, client, dlq)
			healed = true
			dls, err := stream.NewDeadLetters(client, cfg)
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 15*time.Second, "every doomed message dead-lettered", func() bool {
				list, err := dls.List(ctx, topic, stream.ListOptions{Count: 100})
				return err == nil && len(list) == doomed
			})
			list, err := dls.List(ctx, topic, stream.ListOptions{Count: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, dl := range list {
				var o order
				b, err := dl.Body()
				if err == nil {
					err = json.Unmarshal(b, &o)
				}
				if err != nil {
					t.Fatalf("dead letter %s: %v", dl.ID, err)
				}
				if want := fmt.Sprintf("order %d cannot be handled", o.ID); !strings.Contains(dl.Error, want) {
					t.Errorf("dead letter of order %d: reason %q, want it to say %q", o.ID, dl.Error, want)
				}
			}
			eventually(t, 5*time.Second, "nothing pending, OnFailure told of each", func() bool {
				mu.Lock()
				n := len(failures)
				mu.Unlock()
				return n == doomed && pending(t, client, topic, "g") == 0
			})
			eventually(t, 5*time.Second, "healthy again", func() bool {
				hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				return c.Healthy(hctx) == nil
			})
		})
	}
}

// mustDo runs cmd and fails the test on an error.
func mustDo(t *testing.T, c rueidis.Client, cmd rueidis.Completed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, cmd).Error(); err != nil {
		t.Fatalf("%v: %v", cmd.Commands(), err)
	}
}
