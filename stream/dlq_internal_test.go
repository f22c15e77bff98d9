package stream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// The tests of this file run the dead-letter scripts directly on real redis-servers: huge
// entries, the transaction's undo paths, concurrent movers, failures and a hung server.

var dlqSeq int

// dlqKeys returns a fresh topic stream and its dead-letter stream.
func dlqKeys(t testing.TB) (stream, dlq string) {
	t.Helper()
	dlqSeq++
	stream = fmt.Sprintf("dlqt-%d-%d", time.Now().UnixNano()%1e9, dlqSeq)
	return stream, streamwire.DeadLetterStreamName(stream)
}

func do(t testing.TB, c rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	r := c.Do(context.Background(), cmd)
	if err := r.Error(); err != nil {
		t.Fatalf("%v: %v", cmd.Commands()[:min(3, len(cmd.Commands()))], err)
	}
	return r
}

// pendingEntry writes fields as one entry of stream, creates group g and delivers the entry
// to consumer c1, so that it is pending. It returns the entry id.
func pendingEntry(t testing.TB, c rueidis.Client, stream string, fields []string) string {
	t.Helper()
	id, err := c.Do(context.Background(), c.B().Arbitrary("XADD").Keys(stream).Args("*").Args(fields...).Build()).ToString()
	if err != nil {
		t.Fatalf("XADD: %v", err)
	}
	do(t, c, c.B().XgroupCreate().Key(stream).Group("g").Id("0").Build())
	do(t, c, c.B().Xreadgroup().Group("g", "c1").Count(1).Streams().Key(stream).Id(">").Build())
	return id
}

// entryFields returns the fields of entry id of stream (nil when missing).
func entryFields(t testing.TB, c rueidis.Client, stream, id string) []string {
	t.Helper()
	msg, err := c.Do(context.Background(), c.B().Xrange().Key(stream).Start(id).End(id).Build()).ToMessage()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", stream, err)
	}
	entries, err := parseEntries(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		return nil
	}
	return entries[0].fields
}

// pendingOf returns the owner and delivery count of pending entry id ("" and 0 if not pending).
func pendingOf(t testing.TB, c rueidis.Client, stream, id string) (string, int64) {
	t.Helper()
	res, err := c.Do(context.Background(), c.B().Xpending().Key(stream).Group("g").Start(id).End(id).Count(1).Build()).ToArray()
	if err != nil {
		t.Fatalf("XPENDING: %v", err)
	}
	if len(res) == 0 {
		return "", 0
	}
	e, _ := res[0].ToArray()
	owner, _ := e[1].ToString()
	n, _ := e[3].AsInt64()
	return owner, n
}

func xlenOf(t testing.TB, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("XLEN %s: %v", key, err)
	}
	return n
}

// manyFields returns n field names and values (n/2 pairs) with values of size bytes.
func manyFields(pairs, size int) []string {
	f := make([]string, 0, 2*pairs)
	v := strings.Repeat("v", max(size-8, 0))
	for i := 0; i < pairs; i++ {
		f = append(f, "f"+strconv.Itoa(i), fmt.Sprintf("%08d", i)+v)
	}
	return f
}

func equalFields(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkDeadLetter checks that dead letter dlID of dlq holds fields and then the dl_* fields.
func checkDeadLetter(t testing.TB, c rueidis.Client, dlq, dlID string, fields []string, id, owner string, deliveries int64, reason string) {
	t.Helper()
	got := entryFields(t, c, dlq, dlID)
	if len(got) != len(fields)+12 {
		t.Fatalf("dead letter has %d field names and values, want %d + 12", len(got), len(fields))
	}
	if !equalFields(got[:len(fields)], fields) {
		t.Fatal("dead letter fields differ from the entry's")
	}
	tail := got[len(fields):]
	want := []string{"dl_id", id, "dl_group", "g", "dl_consumer", owner, "dl_deliveries", strconv.FormatInt(deliveries, 10), "dl_error", reason, "dl_ts"}
	if !equalFields(tail[:11], want) {
		t.Fatalf("dl fields = %q, want %q", tail[:11], want)
	}
	if ms, err := strconv.ParseInt(tail[11], 10, 64); err != nil || time.Since(time.UnixMilli(ms)) > time.Minute {
		t.Errorf("dl_ts = %q", tail[11])
	}
}

// vmHWM reads the peak resident set size (kB) of process pid ("self" for this one).
func vmHWM(pid string) int64 { return procStatus(pid, "VmHWM:") }

// procStatus reads a kB value of /proc/<pid>/status.
func procStatus(pid, key string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			n, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return n
		}
	}
	return -1
}

// resetHWM resets the peak resident set size of process pid to its current size.
func resetHWM(pid string) { _ = os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0) }

func serverPid(t testing.TB, c rueidis.Client) string {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return v
		}
	}
	t.Fatal("no process_id in INFO")
	return ""
}

// measure runs f and reports its time, the bytes this process allocated and the peak RSS of
// this process and of the Redis server during it.
func measure(t *testing.T, what, redisPid string, f func()) {
	t.Helper()
	runtime.GC()
	resetHWM("self")
	resetHWM(redisPid)
	rss := procStatus(redisPid, "VmRSS:")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	t.Logf("%s: %v; Go allocated %.1f MB; peak RSS: test process %.1f MB, redis-server %.1f MB (%.1f MB before)", what,
		elapsed.Round(time.Millisecond), float64(after.TotalAlloc-before.TotalAlloc)/1e6,
		float64(vmHWM("self"))/1e3, float64(vmHWM(redisPid))/1e3, float64(rss)/1e3)
}

// TestDLQHugeMoveAndReplay dead-letters and replays a 100,000-field entry, a 10 MB entry and
// a 10 MB entry of 100,000 fields on a dedicated redis-server, and checks every byte.
func TestDLQHugeMoveAndReplay(t *testing.T) {
	cases := []struct {
		name   string
		fields []string
	}{
		{"100k fields", manyFields(100_000, 10)},
		{"10 MB body", []string{fieldKey, "k", fieldEnc, encPlain, fieldBody, `"` + strings.Repeat("b", 10<<20) + `"`, fieldTS, "1"}},
		{"100k fields of 100 B", manyFields(100_000, 100)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.NewServer(t)
			c := redistest.NewClient(t, srv.Addr)
			pid := serverPid(t, c)
			stream, dlq := dlqKeys(t)
			id := pendingEntry(t, c, stream, tc.fields)
			var res deadLetterResult
			measure(t, "dead-letter", pid, func() {
				var err error
				res, err = moveToDeadLetter(context.Background(), c, deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: "boom", Owner: "c1"})
				if err != nil || res.Status != 1 || res.ID == "" {
					t.Fatalf("moveToDeadLetter = %+v, %v", res, err)
				}
			})
			checkDeadLetter(t, c, dlq, res.ID, tc.fields, id, "c1", 1, "boom")
			if owner, _ := pendingOf(t, c, stream, id); owner != "" {
				t.Fatalf("entry still pending for %s after the move", owner)
			}
			if n, _ := c.Do(context.Background(), c.B().Exists().Key(streamwire.DeadLetterMarkKey(dlq)).Build()).AsInt64(); n != 0 {
				t.Error("the transaction's mark key was left behind")
			}
			d, err := NewDeadLetters(c, Config{})
			if err != nil {
				t.Fatal(err)
			}
			var newID string
			measure(t, "replay", pid, func() {
				if newID, err = d.Replay(context.Background(), stream, res.ID); err != nil {
					t.Fatalf("Replay: %v", err)
				}
			})
			want := append(append([]string{}, tc.fields...), "replay_group", "g")
			if got := entryFields(t, c, stream, newID); !equalFields(got, want) {
				t.Fatalf("replayed entry has %d field names and values, differs from the original's %d (+ replay_group)", len(got), len(tc.fields))
			}
			if n := xlenOf(t, c, dlq); n != 0 {
				t.Errorf("%d dead letters after the replay, want 0", n)
			}
		})
	}
}

// TestDLQInlineLimitBoundary: entries just under, at and over the size one script can move
// are moved and replayed intact, by whichever path applies.
func TestDLQInlineLimitBoundary(t *testing.T) {
	c := redistest.Client(t)
	d, _ := NewDeadLetters(c, Config{})
	for _, pairs := range []int{3494, 3495, 3496, 3500, 4000} { // 2*pairs + 12 around 7000
		stream, dlq := dlqKeys(t)
		fields := manyFields(pairs, 4)
		id := pendingEntry(t, c, stream, fields)
		res, err := moveToDeadLetter(context.Background(), c, deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: "r"})
		if err != nil || res.Status != 1 {
			t.Fatalf("%d pairs: move = %+v, %v", pairs, res, err)
		}
		checkDeadLetter(t, c, dlq, res.ID, fields, id, "c1", 1, "r")
		newID, err := d.Replay(context.Background(), stream, res.ID, ToAllGroups())
		if err != nil {
			t.Fatalf("%d pairs: Replay: %v", pairs, err)
		}
		if got := entryFields(t, c, stream, newID); !equalFields(got, fields) {
			t.Fatalf("%d pairs: replayed entry differs", pairs)
		}
	}
}

// TestDLQLargeMoveRechecks: between the read of a large entry and its transaction, the
// entry is acknowledged, claimed by another consumer, kept alive by its owner, or deleted.
// The transaction then writes no dead letter (the one its XADD wrote is undone) and, for the
// deleted entry, acknowledges it.
func TestDLQLargeMoveRechecks(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		minIdle int64
		race    func(stream, id string)
		status  int64
		pending bool
	}{
		{"acknowledged", 0, func(s, id string) { do(t, c, c.B().Xack().Key(s).Group("g").Id(id).Build()) }, 0, false},
		{"claimed by another consumer", 0, func(s, id string) {
			do(t, c, c.B().Xclaim().Key(s).Group("g").Consumer("c2").MinIdleTime("0").Id(id).Build())
		}, 0, true},
		// An hour: the owner's XCLAIM makes the entry idle for 0 ms, and the recheck must
		// see it however slow the machine is between the two calls.
		{"lease refreshed by its owner", 3_600_000, func(s, id string) {
			do(t, c, c.B().Xclaim().Key(s).Group("g").Consumer("c1").MinIdleTime("0").Id(id).Justid().Build())
		}, 0, true},
		{"deleted from the stream", 0, func(s, id string) { do(t, c, c.B().Xdel().Key(s).Id(id).Build()) }, -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stream, dlq := dlqKeys(t)
			fields := manyFields(10_000, 8)
			id := pendingEntry(t, c, stream, fields)
			do(t, c, c.B().Xadd().Key(dlq).Id("*").FieldValue().FieldValue("old", "letter").Build())
			m := deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: "r", MinIdleMs: tc.minIdle}
			// The first call (which hands the large entry to moveLarge) checks no idle time;
			// moveLarge rechecks tc.minIdle after the race.
			res, err := deadLetterScript.Exec(ctx, c, []string{stream, dlq},
				[]string{"g", id, "r", "0", "0", "0", "", "7000"}).ToArray()
			if err != nil || len(res) != 7 {
				t.Fatalf("deadletter.lua = %v, %v", res, err)
			}
			var p largeMove
			p.deliveries, _ = res[3].AsInt64()
			p.owner, _ = res[4].ToString()
			p.now, _ = res[5].ToString()
			p.fields, _ = res[6].AsStrSlice()
			if !equalFields(p.fields, fields) || p.owner != "c1" || p.deliveries != 1 {
				t.Fatalf("status-2 reply: owner %q, deliveries %d, %d fields", p.owner, p.deliveries, len(p.fields))
			}
			tc.race(stream, id)
			owner0, n0 := pendingOf(t, c, stream, id)
			r, err := moveLarge(ctx, c, m, p)
			if err != nil || r.Status != tc.status || r.ID != "" {
				t.Fatalf("moveLarge = %+v, %v; want status %d", r, err, tc.status)
			}
			if n := xlenOf(t, c, dlq); n != 1 {
				t.Errorf("dead-letter stream has %d entries, want only the old one", n)
			}
			owner, n := pendingOf(t, c, stream, id)
			switch {
			case tc.pending && (owner != owner0 || n != n0):
				t.Errorf("pending after = (%q, %d), before (%q, %d); want it unchanged", owner, n, owner0, n0)
			case !tc.pending && owner != "":
				t.Errorf("still pending for %q", owner)
			}
		})
	}
}

// TestDLQLargeMoveFailures: a move whose transaction fails leaves the entry pending and
// writes no dead letter: the dead-letter key holds another type, the server is out of
// memory, or the mark key is someone else's.
func TestDLQLargeMoveFailures(t *testing.T) {
	srv := redistest.NewServer(t, "--maxmemory-policy", "noeviction")
	c := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	fields := manyFields(20_000, 8)
	move := func(stream, dlq, id string) (deadLetterResult, error) {
		return moveToDeadLetter(ctx, c, deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: "r"})
	}
	t.Run("dead-letter key of another type", func(t *testing.T) {
		stream, dlq := dlqKeys(t)
		id := pendingEntry(t, c, stream, fields)
		do(t, c, c.B().Set().Key(dlq).Value("not a stream").Build())
		if r, err := move(stream, dlq, id); err == nil {
			t.Fatalf("move = %+v, want an error", r)
		}
		if owner, n := pendingOf(t, c, stream, id); owner != "c1" || n != 1 {
			t.Errorf("pending = (%q, %d), want still (c1, 1)", owner, n)
		}
		if v, _ := c.Do(ctx, c.B().Get().Key(dlq).Build()).ToString(); v != "not a stream" {
			t.Errorf("dead-letter key = %q, was changed", v)
		}
	})
	t.Run("out of memory", func(t *testing.T) {
		stream, dlq := dlqKeys(t)
		id := pendingEntry(t, c, stream, fields)
		do(t, c, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "1").Build())
		r, err := move(stream, dlq, id)
		do(t, c, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "0").Build())
		if err == nil || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("move = %+v, %v; want an OOM error", r, err)
		}
		if owner, n := pendingOf(t, c, stream, id); owner != "c1" || n != 1 {
			t.Errorf("pending = (%q, %d), want still (c1, 1)", owner, n)
		}
		if n := xlenOf(t, c, dlq); n != 0 {
			t.Errorf("%d dead letters, want 0", n)
		}
		// Once memory is back, the move succeeds.
		if r, err := move(stream, dlq, id); err != nil || r.Status != 1 {
			t.Fatalf("move after the outage = %+v, %v", r, err)
		}
		checkDeadLetter(t, c, dlq, mustLast(t, c, dlq), fields, id, "c1", 1, "r")
	})
	t.Run("mark key of another type", func(t *testing.T) {
		stream, dlq := dlqKeys(t)
		id := pendingEntry(t, c, stream, fields)
		do(t, c, c.B().Rpush().Key(streamwire.DeadLetterMarkKey(dlq)).Element("someone else's").Build())
		if r, err := move(stream, dlq, id); err == nil || !strings.Contains(err.Error(), "not a mark") {
			t.Fatalf("move = %+v, %v; want an error naming the mark key", r, err)
		}
		if owner, _ := pendingOf(t, c, stream, id); owner != "c1" {
			t.Errorf("entry no longer pending (owner %q)", owner)
		}
		if n, _ := c.Do(ctx, c.B().Llen().Key(streamwire.DeadLetterMarkKey(dlq)).Build()).AsInt64(); n != 1 {
			t.Error("the foreign mark key was changed")
		}
	})
}

func mustLast(t testing.TB, c rueidis.Client, dlq string) string {
	t.Helper()
	id, err := dlqLastScript.Exec(context.Background(), c, []string{dlq}, nil).ToString()
	if err != nil || id == "" {
		t.Fatalf("dlq_last.lua = %q, %v", id, err)
	}
	return id
}

// TestDLQConcurrentMovers: movers racing on one large pending entry (a consumer's own
// dead-letter call and scans of other consumers) move it exactly once.
func TestDLQConcurrentMovers(t *testing.T) {
	c := redistest.Client(t)
	for round := 0; round < 5; round++ {
		stream, dlq := dlqKeys(t)
		id := pendingEntry(t, c, stream, manyFields(20_000, 8))
		var wg sync.WaitGroup
		results := make([]deadLetterResult, 6)
		errs := make([]error, 6)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: fmt.Sprint("mover ", i)}
				if i%2 == 0 {
					m.Owner = "c1"
				}
				results[i], errs[i] = moveToDeadLetter(context.Background(), c, m)
			}()
		}
		wg.Wait()
		moved := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("mover %d: %v", i, errs[i])
			}
			if r.Status == 1 {
				moved++
			}
		}
		if moved != 1 {
			t.Fatalf("round %d: %d movers moved the entry, want 1", round, moved)
		}
		if n := xlenOf(t, c, dlq); n != 1 {
			t.Fatalf("round %d: %d dead letters, want 1", round, n)
		}
		if owner, _ := pendingOf(t, c, stream, id); owner != "" {
			t.Fatalf("round %d: still pending", round)
		}
	}
}

// TestDLQConcurrentLargeReplays: replays racing on one large dead letter replay it once; the
// losers get ErrNotFound and leave no entry behind.
func TestDLQConcurrentLargeReplays(t *testing.T) {
	c := redistest.Client(t)
	d, _ := NewDeadLetters(c, Config{})
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		stream, dlq := dlqKeys(t)
		fields := manyFields(20_000, 8)
		id := pendingEntry(t, c, stream, fields)
		if r, err := moveToDeadLetter(ctx, c, deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: "r"}); err != nil || r.Status != 1 {
			t.Fatalf("move = %+v, %v", r, err)
		}
		dlID := mustLast(t, c, dlq)
		var wg sync.WaitGroup
		ids := make([]string, 6)
		errs := make([]error, 6)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					ids[i], errs[i] = d.Replay(ctx, stream, dlID)
				} else {
					var n int
					n, errs[i] = d.ReplayAll(ctx, stream, 0)
					ids[i] = strings.Repeat("x", n) // "x" when ReplayAll replayed it
				}
			}()
		}
		wg.Wait()
		replayed := 0
		for i := range ids {
			switch {
			case errs[i] == nil && ids[i] != "":
				replayed++
			case errs[i] == nil, errors.Is(errs[i], redstream.ErrNotFound):
			default:
				t.Fatalf("replay %d: %v", i, errs[i])
			}
		}
		if replayed != 1 {
			t.Fatalf("round %d: %d replays succeeded, want 1", round, replayed)
		}
		if n := xlenOf(t, c, stream); n != 2 {
			t.Fatalf("round %d: topic has %d entries, want the original and one replay", round, n)
		}
		if n := xlenOf(t, c, dlq); n != 0 {
			t.Fatalf("round %d: %d dead letters left", round, n)
		}
	}
}

// TestDLQLargeReplayUndo: a large dead letter deleted between its read and its transaction
// is not replayed, and the entry the transaction wrote is removed in the same step.
func TestDLQLargeReplayUndo(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	stream, dlq := dlqKeys(t)
	id := pendingEntry(t, c, stream, manyFields(10_000, 8))
	if r, err := moveToDeadLetter(ctx, c, deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: "r"}); err != nil || r.Status != 1 {
		t.Fatalf("move = %+v, %v", r, err)
	}
	dlID := mustLast(t, c, dlq)
	res, err := replayScript.Exec(ctx, c, []string{dlq, stream}, []string{dlID, dlID, "1", "7000"}).ToArray()
	if err != nil || len(res) != 3 {
		t.Fatalf("replay.lua = %v, %v", res, err)
	}
	fields, _ := res[2].AsStrSlice()
	do(t, c, c.B().Xdel().Key(dlq).Id(dlID).Build())
	// A reader blocked on the topic must not see the entry that the transaction writes and
	// removes.
	seen := make(chan int, 1)
	go func() {
		res, err := c.Do(ctx, c.B().Xread().Block(1500).Streams().Key(stream).Id("$").Build()).AsXRead()
		switch {
		case rueidis.IsRedisNil(err):
			seen <- 0
		case err != nil:
			t.Errorf("XREAD: %v", err)
			seen <- -1
		default:
			seen <- len(res[stream]) // woken after the EXEC, it finds nothing new
		}
	}()
	time.Sleep(300 * time.Millisecond)
	newID, err := replayLarge(ctx, c, stream, dlq, dlID, fields)
	if err != nil || newID != "" {
		t.Fatalf("replayLarge = %q, %v; want nothing replayed", newID, err)
	}
	if n := <-seen; n != 0 {
		t.Errorf("a blocked XREAD read %d entries, want none", n)
	}
	if n := xlenOf(t, c, stream); n != 1 {
		t.Errorf("topic has %d entries, want only the original", n)
	}
}

// TestDLQHungServer: with Redis stopped (SIGSTOP), dead-letter calls return within their
// deadline although the caller's context has none.
func TestDLQHungServer(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	stream, dlq := dlqKeys(t)
	id := pendingEntry(t, c, stream, manyFields(10, 4))
	d, _ := NewDeadLetters(c, Config{})
	d.timeout = 500 * time.Millisecond
	pid, _ := strconv.Atoi(serverPid(t, c))
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	ctx := context.Background()
	calls := []struct {
		name string
		f    func() error
	}{
		{"Len", func() error { _, err := d.Len(ctx, stream); return err }},
		{"List", func() error { _, err := d.List(ctx, stream, ListOptions{}); return err }},
		{"Replay", func() error { _, err := d.Replay(ctx, stream, "1-1"); return err }},
		{"ReplayAll", func() error { _, err := d.ReplayAll(ctx, stream, 0); return err }},
		{"Delete", func() error { _, err := d.Delete(ctx, stream, "1-1"); return err }},
		{"Purge", func() error { _, err := d.Purge(ctx, stream); return err }},
	}
	for _, call := range calls {
		start := time.Now()
		err := call.f()
		if err == nil || time.Since(start) > 5*time.Second {
			t.Errorf("%s on a hung server: %v after %v; want an error within about 0.5 s", call.name, err, time.Since(start))
		}
	}
	start := time.Now()
	_, err := moveToDeadLetter(ctx, c, deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id, Reason: "r"})
	if err == nil || time.Since(start) > adminTimeout+5*time.Second {
		t.Errorf("moveToDeadLetter on a hung server: %v after %v; want an error within %v", err, time.Since(start), adminTimeout)
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if owner, n := pendingOf(t, c, stream, id); owner != "c1" || n != 1 {
		t.Errorf("after the outage pending = (%q, %d), want (c1, 1)", owner, n)
	}
}

// TestDLQLargeBounds: a dead-letter bound beyond 2^53 reaches XTRIM as the integer it is
// (a Lua number would be formatted as 1.2345678901234568e+17 and rejected), on both paths;
// small bounds trim on both paths.
func TestDLQLargeBounds(t *testing.T) {
	c := redistest.Client(t)
	for _, pairs := range []int{10, 5000} { // one script; the transaction
		stream, dlq := dlqKeys(t)
		fields := manyFields(pairs, 4)
		id := pendingEntry(t, c, stream, fields)
		r, err := moveToDeadLetter(context.Background(), c, deadLetterMove{Stream: stream, DLQ: dlq, Group: "g", ID: id,
			Reason: "r", MaxLen: 123456789012345678, MaxAgeMs: 123456789012})
		if err != nil || r.Status != 1 {
			t.Fatalf("%d pairs: move with huge bounds = %+v, %v", pairs, r, err)
		}
		stream2, dlq2 := dlqKeys(t)
		for i := 0; i < 3; i++ {
			do(t, c, c.B().Xadd().Key(dlq2).Id("*").FieldValue().FieldValue("old", strconv.Itoa(i)).Build())
		}
		id = pendingEntry(t, c, stream2, fields)
		r, err = moveToDeadLetter(context.Background(), c, deadLetterMove{Stream: stream2, DLQ: dlq2, Group: "g", ID: id, Reason: "r", MaxLen: 2})
		if err != nil || r.Status != 1 || r.Trimmed != 2 || xlenOf(t, c, dlq2) != 2 {
			t.Fatalf("%d pairs: move with MaxLen 2 = %+v, %v; want 2 trimmed", pairs, r, err)
		}
	}
}
