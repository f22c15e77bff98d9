package periodic_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream/periodic"
)

// serverPID returns the process id of the redis-server behind client.
func serverPID(t *testing.T, client rueidis.Client) int {
	t.Helper()
	info, err := client.Do(context.Background(), client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}

// records is a slog handler keeping its records' levels and messages.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}

func (r *records) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// TestHungRedis SIGSTOPs Redis under a running schedule: every call ends at its deadline
// (Stop of a second scheduler returns while Redis hangs), the failures are counted and
// logged once, and after SIGCONT the missed ticks are caught up, each once.
func TestHungRedis(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	pid := serverPID(t, client)
	ctx := context.Background()
	topic := newTopic(t)
	sc := periodic.Schedule{Name: "h", Topic: topic, Every: 10 * time.Millisecond, Missed: periodic.MissedAll, MaxCatchUp: 100000,
		Late: 100 * time.Millisecond}
	set := vm.NewSet()
	logs := &records{}
	s, err := periodic.New(client, periodic.Options{Timeout: 200 * time.Millisecond, Metrics: set, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	other := mustNew(t, client)
	for _, x := range []*periodic.Scheduler{s, other} {
		if err := x.Add(ctx, sc); err != nil {
			t.Fatal(err)
		}
		if err := x.Start(); err != nil {
			t.Fatal(err)
		}
	}
	waitLen(t, client, topic, 20, 30*time.Second)

	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	time.Sleep(time.Second)
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	began := time.Now()
	err = other.Stop(stopCtx) // its call in flight ends at its 1 s deadline
	cancel()
	if err != nil {
		t.Fatalf("Stop while Redis hangs: %v after %v", err, time.Since(began))
	}
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true

	back := time.Now()
	for deadline := back.Add(60 * time.Second); listOne(t, s, topic).Last.Before(back.Add(300 * time.Millisecond)); {
		if time.Now().After(deadline) {
			t.Fatalf("no tick decided 300 ms after SIGCONT within 60 s: %+v", listOne(t, s, topic))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopScheduler(t, s)
	ticks := readTicks(t, client, topic, "h")
	if missing := checkOnce(t, ticks, sc.Every); missing != 0 {
		t.Fatalf("%d ticks missing after the stall", missing)
	}
	info := listOne(t, s, topic)
	if info.CaughtUp < 100 || info.Skipped != 0 {
		t.Fatalf("state %+v: want the 1.5 s stall's ticks caught up", info)
	}
	labels := `{topic="` + topic + `",schedule="h"}`
	errs := set.GetOrCreateCounter("redis_streaming_periodic_errors_total" + labels).Get()
	sent := set.GetOrCreateCounter("redis_streaming_periodic_sent_total" + labels).Get()
	if errs == 0 || sent == 0 || sent > uint64(len(ticks)) {
		t.Fatalf("metrics: %d errors, %d sent (of %d ticks)", errs, sent, len(ticks))
	}
	if w, i := logs.count("WARN periodic: delivering"), logs.count("INFO periodic: delivering"); w != 1 || i != 1 {
		t.Fatalf("logs %q: want one warning and one recovery", logs.msgs)
	}
	t.Logf("%d ticks, %d caught up after the stall, %d failed calls counted", len(ticks), info.CaughtUp, errs)
}
