package periodic_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream/periodic"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func newTopic(t *testing.T) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "ticks-" + hex.EncodeToString(b[:])
}

// tick is one delivered tick: its time and the server time of its send, in ms.
type tick struct{ at, sentAt int64 }

// readTicks returns the ticks of schedule name in stream, in stream order, failing on an
// entry that is not a tick of it.
func readTicks(t *testing.T, client rueidis.Client, stream, name string) []tick {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entries, err := client.Do(ctx, client.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]tick, 0, len(entries))
	for _, e := range entries {
		key := e.FieldValues["key"]
		ms, err := strconv.ParseInt(strings.TrimPrefix(key, name+"@"), 10, 64)
		if err != nil || !strings.HasPrefix(key, name+"@") {
			t.Fatalf("entry %s: key %q, want %s@<ms>", e.ID, key, name)
		}
		if h := e.FieldValues["h:redstream-tick"]; h != time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00") {
			t.Fatalf("entry %s: tick header %q for tick %d", e.ID, h, ms)
		}
		ts, err := strconv.ParseInt(e.FieldValues["ts"], 10, 64)
		if err != nil {
			t.Fatalf("entry %s: ts %q", e.ID, e.FieldValues["ts"])
		}
		out = append(out, tick{at: ms, sentAt: ts})
	}
	return out
}

// checkOnce fails unless every tick appears once, in increasing order, each a multiple of
// every; it returns the number of ticks missing between the first and the last.
func checkOnce(t *testing.T, ticks []tick, every time.Duration) (missing int64) {
	t.Helper()
	step := every.Milliseconds()
	for i, tk := range ticks {
		if tk.at%step != 0 {
			t.Fatalf("tick %d not a multiple of %v", tk.at, every)
		}
		if i > 0 && tk.at <= ticks[i-1].at {
			t.Fatalf("tick %d after tick %d: sent twice or out of order", tk.at, ticks[i-1].at)
		}
		if i > 0 {
			missing += (tk.at-ticks[i-1].at)/step - 1
		}
	}
	return missing
}

// waitLen waits until stream has at least n entries, through Redis restarts.
func waitLen(t *testing.T, client rueidis.Client, stream string, n int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := client.Do(ctx, client.B().Xlen().Key(stream).Build()).AsInt64()
		cancel()
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: %d entries (err %v) after %v, want %d", stream, got, err, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustNew(t *testing.T, client rueidis.Client) *periodic.Scheduler {
	t.Helper()
	s, err := periodic.New(client, periodic.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stopScheduler(t *testing.T, s *periodic.Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSendListPauseRemove sends a fixed-interval schedule from two schedulers, lists it,
// pauses, resumes and removes it.
func TestSendListPauseRemove(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	sc := periodic.Schedule{Name: "beat", Topic: topic, Every: 20 * time.Millisecond, Tag: "t1", Body: []byte(`{"job":"report"}`)}
	a, b := mustNew(t, client), mustNew(t, client)
	for _, s := range []*periodic.Scheduler{a, b} {
		if err := s.Add(ctx, sc); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer stopScheduler(t, b)
	defer stopScheduler(t, a)
	if err := a.Add(ctx, sc); !errors.Is(err, periodic.ErrNotFound) && (err == nil || !strings.Contains(err.Error(), "added twice")) {
		t.Fatalf("second Add = %v, want added twice", err)
	}
	waitLen(t, client, topic, 10, 10*time.Second)

	e, err := client.Do(ctx, client.B().Xrange().Key(topic).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	f := e[0].FieldValues
	if f["tag"] != "t1" || f["enc"] != "plain" || f["body"] != `{"job":"report"}` || f["h:redstream-schedule"] != "beat" {
		t.Fatalf("entry fields %v", f)
	}

	infos, err := a.List(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "beat" || infos[0].Every != sc.Every || infos[0].Sent < 10 || infos[0].Last.IsZero() || infos[0].Paused {
		t.Fatalf("List = %+v", infos)
	}
	all, err := a.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, i := range all {
		found = found || i.Topic == topic && i.Name == "beat"
	}
	if !found {
		t.Fatalf("List(\"\") lacks %s/beat: %+v", topic, all)
	}

	if err := a.Pause(ctx, topic, "beat"); err != nil {
		t.Fatal(err)
	}
	before := listOne(t, a, topic)
	time.Sleep(500 * time.Millisecond) // 25 ticks pass, paused
	during := listOne(t, a, topic)
	if !during.Paused || during.Sent != before.Sent || !during.Last.After(before.Last) {
		t.Fatalf("paused: before %+v, after %+v: want ticks decided and none sent", before, during)
	}
	if err := b.Resume(ctx, topic, "beat"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after := listOne(t, a, topic)
		if after.Paused || after.CaughtUp != 0 {
			t.Fatalf("resumed: %+v after %+v: want no paused tick caught up", after, during)
		}
		if after.Sent > during.Sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed: %+v after %+v: no tick sent within 10 s", after, during)
		}
	}

	if err := a.Remove(ctx, topic, "beat"); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(ctx, topic, "beat"); !errors.Is(err, periodic.ErrNotFound) {
		t.Fatalf("second Remove = %v, want ErrNotFound", err)
	}
	if err := a.Pause(ctx, topic, "nope"); !errors.Is(err, periodic.ErrNotFound) {
		t.Fatalf("Pause of an unknown schedule = %v, want ErrNotFound", err)
	}
	time.Sleep(100 * time.Millisecond)
	n1 := len(readTicks(t, client, topic, "beat"))
	time.Sleep(200 * time.Millisecond)
	if n2 := len(readTicks(t, client, topic, "beat")); n2 != n1 {
		t.Fatalf("removed schedule still sends: %d entries, then %d", n1, n2)
	}
	if infos, _ := a.List(ctx, topic); len(infos) != 0 {
		t.Fatalf("List after Remove = %+v", infos)
	}
	checkOnce(t, readTicks(t, client, topic, "beat"), sc.Every)
}

func listOne(t *testing.T, s *periodic.Scheduler, topic string) periodic.Info {
	t.Helper()
	infos, err := s.List(context.Background(), topic)
	if err != nil || len(infos) != 1 {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	return infos[0]
}

// TestCluster runs one schedule from three schedulers on a 3-master Redis Cluster: each tick
// is sent once.
func TestCluster(t *testing.T) {
	client := redistest.ClusterClient(t)
	ctx := context.Background()
	topic := newTopic(t)
	sc := periodic.Schedule{Name: "c", Topic: topic, Every: 10 * time.Millisecond, Missed: periodic.MissedAll, MaxCatchUp: 10000}
	for range 3 {
		s := mustNew(t, client)
		if err := s.Add(ctx, sc); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		defer stopScheduler(t, s)
	}
	waitLen(t, client, topic, 200, 30*time.Second)
	ticks := readTicks(t, client, topic, "c")
	if missing := checkOnce(t, ticks, sc.Every); missing != 0 {
		t.Fatalf("%d ticks missing", missing)
	}
	if infos, err := mustNew(t, client).List(ctx, ""); err != nil || len(infos) == 0 {
		t.Fatalf("List on the cluster = %v, %v", infos, err)
	}
}

// childEnv names the environment of TestChild.
const childEnv = "PERIODIC_CHILD_TOPIC"

// TestChild is one process of TestExactlyOnceAcrossProcesses: it delivers the schedule
// until it is killed.
func TestChild(t *testing.T) {
	topic := os.Getenv(childEnv)
	if topic == "" {
		t.Skip("run by TestExactlyOnceAcrossProcesses")
	}
	client := redistest.Client(t)
	s := mustNew(t, client)
	sc := periodic.Schedule{Name: "x", Topic: topic, Every: 10 * time.Millisecond, Missed: periodic.MissedAll, MaxCatchUp: 100000}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.Add(ctx, sc)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("started\n")
	select {}
}

// startChild runs TestChild as a child process for topic on Redis at addr; it returns once
// the child delivers.
func startChild(t *testing.T, topic, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+topic, "REDSTREAM_REDIS_ADDR="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "started" {
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return cmd
}

func kill(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// TestExactlyOnceAcrossProcesses runs one 10 ms schedule in three processes over more than
// 1,000 ticks, while one process is SIGKILLed and restarted and while Redis (AOF, fsync
// always) is killed and restarted: every tick from the first to the last is sent exactly
// once (MissedAll sends the ticks of the restart's outage late).
func TestExactlyOnceAcrossProcesses(t *testing.T) {
	srv := redistest.NewServer(t, "--appendonly", "yes", "--appendfsync", "always")
	client := redistest.NewClient(t, srv.Addr)
	topic := newTopic(t)
	var children [3]*exec.Cmd
	for i := range children {
		children[i] = startChild(t, topic, srv.Addr)
	}
	defer func() {
		for _, c := range children {
			kill(c)
		}
	}()
	waitLen(t, client, topic, 300, 60*time.Second)
	kill(children[0])
	waitLen(t, client, topic, 450, 60*time.Second)
	children[0] = startChild(t, topic, srv.Addr)
	waitLen(t, client, topic, 600, 60*time.Second)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitLen(t, client, topic, 1100, 60*time.Second)
	for _, c := range children {
		kill(c)
	}
	ticks := readTicks(t, client, topic, "x")
	if missing := checkOnce(t, ticks, 10*time.Millisecond); missing != 0 {
		t.Fatalf("%d of %d ticks missing", missing, len(ticks)+int(missing))
	}
	late := 0
	for _, tk := range ticks {
		if tk.sentAt-tk.at > 100 {
			late++
		}
	}
	t.Logf("%d ticks, each sent once; %d of them sent more than 100 ms after their time (the Redis restart)", len(ticks), late)
}

// TestMissedTicksAcrossOutage stops Redis for 30 s under two schedulers holding one 100 ms
// schedule per missed-tick policy (all four through the same outage) and checks each policy:
// every tick between the first and the last decided is sent or skipped, once, and the policy
// decides how many missed ticks are sent late.
func TestMissedTicksAcrossOutage(t *testing.T) {
	const outage = 30 * time.Second
	every := 100 * time.Millisecond
	cases := []struct {
		missed  periodic.Missed
		catchUp int
		sc      periodic.Schedule
	}{
		{missed: periodic.MissedSkip},
		{missed: periodic.MissedOne},
		{missed: periodic.MissedAll, catchUp: 50},
		{missed: periodic.MissedAll, catchUp: 100000},
	}
	srv := redistest.NewServer(t, "--appendonly", "yes", "--appendfsync", "always")
	client := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	for i := range cases {
		cases[i].sc = periodic.Schedule{Name: "m", Topic: newTopic(t), Every: every, Missed: cases[i].missed,
			MaxCatchUp: cases[i].catchUp, Late: time.Second}
	}
	var ss []*periodic.Scheduler
	for range 2 {
		s := mustNew(t, client)
		for _, c := range cases {
			if err := s.Add(ctx, c.sc); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	for _, c := range cases {
		waitLen(t, client, c.sc.Topic, 10, 30*time.Second)
	}
	srv.Stop()
	time.Sleep(outage)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Wait for the catch-up and a second of ticks on time (each write is fsynced, a few ms).
	back := time.Now()
	for _, c := range cases {
		for deadline := back.Add(120 * time.Second); listOne(t, ss[0], c.sc.Topic).Last.Before(back.Add(time.Second)); {
			if time.Now().After(deadline) {
				t.Fatalf("%s/%d: no tick decided a second after the restart within 120 s: %+v", c.missed, c.catchUp, listOne(t, ss[0], c.sc.Topic))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, s := range ss {
		stopScheduler(t, s)
	}
	for _, c := range cases {
		sc := c.sc
		ticks := readTicks(t, client, sc.Topic, "m")
		missing := checkOnce(t, ticks, sc.Every)
		info := listOne(t, ss[0], sc.Topic)
		span := (info.Last.UnixMilli()-ticks[0].at)/sc.Every.Milliseconds() + 1
		if info.Sent != int64(len(ticks)) || info.Sent+info.Skipped != span || missing > info.Skipped {
			t.Errorf("%s/%d: %d ticks in the stream, %d missing among them, state %+v, span %d: want sent+skipped = span", c.missed, c.catchUp, len(ticks), missing, info, span)
			continue
		}
		minMissed := int64((outage-sc.Late)/sc.Every) - 5 // ticks certainly missed, less the edges
		switch {
		case c.missed == periodic.MissedSkip && (info.CaughtUp != 0 || info.Skipped < minMissed),
			c.missed == periodic.MissedOne && (info.CaughtUp < 1 || info.CaughtUp > 20 || info.Skipped < minMissed-20),
			c.catchUp == 50 && (info.CaughtUp < 50 || info.Skipped < minMissed-60),
			c.catchUp == 100000 && (info.CaughtUp < minMissed || info.Skipped != 0 || missing != 0):
			t.Errorf("%s/%d: state %+v after a %v outage (at least %d ticks missed)", c.missed, c.catchUp, info, outage, minMissed)
		}
		t.Logf("%s/%d: %d sent (%d late), %d skipped", c.missed, c.catchUp, info.Sent, info.CaughtUp, info.Skipped)
	}
}
