package stream_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// historyOf sums a stream's recorded history over the minutes from since to now, per
// "<kind>|<group>" field, and checks that every minute key it finds expires.
func historyOf(t *testing.T, client rueidis.Client, streamKey string, since time.Time) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	sum := map[string]int64{}
	for m := since.Unix()/60 - 1; m <= time.Now().Unix()/60+1; m++ {
		key := streamwire.HistoryKey(streamKey, m)
		h, err := client.Do(ctx, client.B().Hgetall().Key(key).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == 0 {
			continue
		}
		ttl, err := client.Do(ctx, client.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil || ttl <= 0 || ttl > streamwire.HistoryTTL.Milliseconds() {
			t.Errorf("%s expires in %d ms (%v), want within %v", key, ttl, err, streamwire.HistoryTTL)
		}
		for f, v := range h {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s %s = %q", key, f, v)
			}
			sum[f] += n
		}
	}
	return sum
}

// TestHistoryRecorded: a consumer records, per minute and group, the entries it handled,
// the failures, the retries and the dead letters: the counts a stopped consumer wrote are
// exactly what its handlers did, across two groups; DisableHistory records nothing.
func TestHistoryRecorded(t *testing.T) {
	client := redistest.Client(t)
	since := time.Now()
	for _, disabled := range []bool{false, true} {
		cfg := fastConfig()
		cfg.DisableHistory = disabled
		topic := newTopic(t)
		p := newProducer(t, client, cfg)
		c := newConsumer(t, client, cfg)
		var handled atomic.Int64
		for _, g := range []string{"billing", "audit"} {
			err := stream.Register(c, stream.Handler[order]{
				Topic: topic, Group: g,
				Handle: func(ctx context.Context, m *stream.Message[order]) error {
					defer handled.Add(1)
					switch {
					case g == "audit":
						return nil
					case m.Body.Status == "fail-once" && m.DeliveryCount == 1:
						return errors.New("transient")
					case m.Body.Status == "permanent":
						return stream.Permanent(errors.New("bad order"))
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, status := range []string{"ok", "ok", "fail-once", "permanent", "ok"} {
			send(t, p, topic, order{i, status})
		}
		// billing: 5 entries, one failing once (6 calls), one dead-lettered; audit: 5.
		eventually(t, 10*time.Second, "every delivery handled", func() bool { return handled.Load() == 11 })
		eventually(t, 10*time.Second, "the dead letter", func() bool {
			n, _ := client.Do(context.Background(), client.B().Xlen().Key(streamwire.DeadLetterStreamName(topic)).Build()).AsInt64()
			return n == 1
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		got := historyOf(t, client, topic, since)
		want := map[string]int64{
			"processed|billing": 4, "failed|billing": 2, "retried|billing": 1, "dead|billing": 1,
			"processed|audit": 5,
		}
		if disabled {
			want = map[string]int64{}
		}
		var diff []string
		for k, v := range want {
			if got[k] != v {
				diff = append(diff, k+"="+strconv.FormatInt(got[k], 10)+" want "+strconv.FormatInt(v, 10))
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				diff = append(diff, k+"="+strconv.FormatInt(v, 10)+" unexpected")
			}
		}
		if len(diff) > 0 {
			t.Errorf("DisableHistory=%v: history %v: %s", disabled, got, strings.Join(diff, "; "))
		}
	}
}
