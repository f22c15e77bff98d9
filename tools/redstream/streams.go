package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

func init() {
	registerCommand(command{
		name:    "streams",
		summary: "topics, groups, consumers, pending and lag: streams --redis host:port [--topic T] [--json]",
		run:     runStreams,
	})
}

const streamsUsage = `usage: redstream streams [--topic T[,T...]] [flags]

Prints each topic's stream (length, first and last entry, dead letters, scheduled messages), its consumer
groups (consumers, pending, lag, last delivered id) and their consumers (pending, idle).
Without --topic it discovers the topics by a bounded SCAN ... TYPE stream of every node
(every master of a cluster), dead-letter streams excluded; --scan-limit bounds the keys
examined per node and the output says when the scan stopped early.

--json prints one JSON document (field names in README "Operating: CLI and dashboards").

flags:
`

// defaultScanLimit is the default bound of the keys one SCAN walk examines per node.
const defaultScanLimit = 100000

// scanCount is the COUNT of each SCAN call.
const scanCount = 1000

// JSON documents of streams. Field names are part of the CLI's interface (README).
type (
	streamsJSON struct {
		Topics []topicJSON `json:"topics"`
		Scan   *scanJSON   `json:"scan,omitempty"` // absent with --topic
	}
	topicJSON struct {
		Topic           string      `json:"topic"`
		Stream          string      `json:"stream"`
		Length          int64       `json:"length"`
		FirstID         string      `json:"first_id"` // "" when the stream is empty
		LastID          string      `json:"last_id"`
		LastGeneratedID string      `json:"last_generated_id"`
		EntriesAdded    int64       `json:"entries_added"` // -1 before Redis 7.0
		DeadLetters     int64       `json:"dead_letters"`
		Scheduled       int64       `json:"scheduled"` // messages sent with a delay, not yet due
		Groups          []groupJSON `json:"groups"`
	}
	groupJSON struct {
		Group           string         `json:"group"`
		Consumers       int64          `json:"consumers"`
		Pending         int64          `json:"pending"`
		Lag             int64          `json:"lag"`       // -1 when Redis cannot tell (lag_known false)
		LagKnown        bool           `json:"lag_known"` // Redis 7.0+ reports it, except after some deletions
		LastDeliveredID string         `json:"last_delivered_id"`
		EntriesRead     int64          `json:"entries_read"` // -1 when unknown
		ConsumerList    []consumerJSON `json:"consumer_list"`
	}
	consumerJSON struct {
		Consumer   string `json:"consumer"`
		Pending    int64  `json:"pending"`
		IdleMS     int64  `json:"idle_ms"`     // since its last attempted interaction
		InactiveMS int64  `json:"inactive_ms"` // since its last successful read or claim; -1 before Redis 7.2
	}
	scanJSON struct {
		Nodes    int  `json:"nodes"`    // nodes scanned
		Keys     int  `json:"keys"`     // stream keys found (after MATCH)
		Complete bool `json:"complete"` // false when --scan-limit stopped a walk
	}
)

func runStreams(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = usageFunc(fs, streamsUsage)
	conn := addConnFlags(fs, "127.0.0.1:6379", true, 30*time.Second)
	topics := fs.String("topic", "", "topic(s), comma-separated (default: every stream the scan finds)")
	env := fs.String("env", "", "environment suffix, when producers use env isolation (the scan keeps only that environment's streams)")
	match := fs.String("match", "*", "SCAN MATCH pattern of the stream keys")
	scanLimit := fs.Int("scan-limit", defaultScanLimit, "most keys SCAN examines per node")
	noConsumers := fs.Bool("no-consumers", false, "do not list each group's consumers")
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("streams: unexpected argument %q", fs.Arg(0))
	}
	if *scanLimit < 1 {
		return fmt.Errorf("streams: --scan-limit %d, want at least 1", *scanLimit)
	}
	cfg := stream.Config{EnvIsolation: *env != "", Env: *env}
	type named struct{ topic, stream string }
	var want []named
	for _, t := range splitIDs(*topics) {
		s, err := streamwire.StreamKey(t, cfg.EnvIsolation, cfg.Env)
		if err != nil {
			return fmt.Errorf("streams: --topic: %w", err)
		}
		want = append(want, named{t, s})
	}
	if _, err := conn.resolve(); err != nil {
		return fmt.Errorf("streams: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, conn.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	client, tgt, err := conn.client(ctx)
	if err != nil {
		return fmt.Errorf("streams: %w", err)
	}
	defer client.Close()

	doc := streamsJSON{Topics: []topicJSON{}}
	if len(want) == 0 {
		keys, scan, err := scanStreamKeys(ctx, client, *match, *scanLimit)
		if err != nil {
			return fmt.Errorf("streams: %w", err)
		}
		doc.Scan = &scan
		for _, k := range keys {
			if strings.HasSuffix(k, ":dlq") {
				continue
			}
			if t, ok := topicOfStream(k, *env); ok {
				want = append(want, named{t, k})
			}
		}
	}
	for _, w := range want {
		t, err := describeStream(ctx, client, w.stream, !*noConsumers)
		if err != nil {
			return fmt.Errorf("streams: topic %q: %w", w.topic, err)
		}
		t.Topic = w.topic
		doc.Topics = append(doc.Topics, t)
	}
	if *asJSON {
		return writeJSON(out, doc)
	}
	printStreams(out, doc, tgt)
	return nil
}

// errNoStream reports a --topic whose stream does not exist.
var errNoStream = errors.New("no such stream")

// describeStream reads one stream's XINFO STREAM, XINFO GROUPS, XINFO CONSUMERS and the
// length of its dead-letter stream, each call bounded.
func describeStream(ctx context.Context, client rueidis.Client, key string, consumers bool) (topicJSON, error) {
	t := topicJSON{Stream: key, EntriesAdded: -1, Groups: []groupJSON{}}
	schedule, _ := streamwire.DelayedKeys(key)
	cctx, cancel := callContext(ctx)
	res := client.DoMulti(cctx,
		client.B().XinfoStream().Key(key).Build(),
		client.B().XinfoGroups().Key(key).Build(),
		client.B().Xlen().Key(streamwire.DeadLetterStreamName(key)).Build(),
		client.B().Zcard().Key(schedule).Build())
	cancel()
	info, err := res[0].AsMap()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return t, fmt.Errorf("%w %q", errNoStream, key)
		}
		return t, fmt.Errorf("XINFO STREAM %s: %w", key, err)
	}
	t.Length = intField(info, "length", 0)
	t.LastGeneratedID = strField(info, "last-generated-id")
	t.EntriesAdded = intField(info, "entries-added", -1)
	t.FirstID = entryID(info["first-entry"])
	t.LastID = entryID(info["last-entry"])
	if t.DeadLetters, err = res[2].AsInt64(); err != nil {
		return t, fmt.Errorf("XLEN %s: %w", streamwire.DeadLetterStreamName(key), err)
	}
	if t.Scheduled, err = res[3].AsInt64(); err != nil {
		return t, fmt.Errorf("ZCARD %s: %w", schedule, err)
	}
	groups, err := res[1].ToArray()
	if err != nil {
		return t, fmt.Errorf("XINFO GROUPS %s: %w", key, err)
	}
	for _, g := range groups {
		m, err := g.AsMap()
		if err != nil {
			return t, fmt.Errorf("XINFO GROUPS %s: %w", key, err)
		}
		gj := groupJSON{
			Group:           strField(m, "name"),
			Consumers:       intField(m, "consumers", 0),
			Pending:         intField(m, "pending", 0),
			LastDeliveredID: strField(m, "last-delivered-id"),
			EntriesRead:     intField(m, "entries-read", -1),
			Lag:             intField(m, "lag", -1),
			ConsumerList:    []consumerJSON{},
		}
		gj.LagKnown = gj.Lag >= 0
		if consumers {
			cctx, cancel := callContext(ctx)
			cs, err := client.Do(cctx, client.B().XinfoConsumers().Key(key).Group(gj.Group).Build()).ToArray()
			cancel()
			if err != nil {
				return t, fmt.Errorf("XINFO CONSUMERS %s %s: %w", key, gj.Group, err)
			}
			for _, c := range cs {
				cm, err := c.AsMap()
				if err != nil {
					return t, fmt.Errorf("XINFO CONSUMERS %s %s: %w", key, gj.Group, err)
				}
				gj.ConsumerList = append(gj.ConsumerList, consumerJSON{
					Consumer:   strField(cm, "name"),
					Pending:    intField(cm, "pending", 0),
					IdleMS:     intField(cm, "idle", 0),
					InactiveMS: intField(cm, "inactive", -1),
				})
			}
			sort.Slice(gj.ConsumerList, func(i, j int) bool { return gj.ConsumerList[i].Consumer < gj.ConsumerList[j].Consumer })
		}
		t.Groups = append(t.Groups, gj)
	}
	sort.Slice(t.Groups, func(i, j int) bool { return t.Groups[i].Group < t.Groups[j].Group })
	return t, nil
}

func intField(m map[string]rueidis.RedisMessage, k string, missing int64) int64 {
	v, ok := m[k]
	if !ok {
		return missing
	}
	n, err := v.AsInt64()
	if err != nil {
		return missing
	}
	return n
}

func strField(m map[string]rueidis.RedisMessage, k string) string {
	v, ok := m[k]
	if !ok {
		return ""
	}
	s, _ := v.ToString()
	return s
}

// entryID returns the id of an XINFO STREAM first-entry/last-entry, "" for nil.
func entryID(m rueidis.RedisMessage) string {
	e, err := m.AsXRangeEntry()
	if err != nil {
		return ""
	}
	return e.ID
}

// scanStreamKeys walks SCAN ... MATCH match TYPE stream on every node of client (each
// master of a cluster; keys seen twice, as on a replica, are kept once), examining at most
// limit keys per node. It returns the keys sorted.
func scanStreamKeys(ctx context.Context, client rueidis.Client, match string, limit int) ([]string, scanJSON, error) {
	scan := scanJSON{Complete: true}
	seen := map[string]bool{}
	nodes := client.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		node := nodes[addr]
		if isReplica(ctx, node) {
			continue
		}
		scan.Nodes++
		var cursor uint64
		for examined := 0; ; examined += scanCount {
			if examined >= limit {
				scan.Complete = false
				break
			}
			cctx, cancel := callContext(ctx)
			e, err := node.Do(cctx, node.B().Scan().Cursor(cursor).Match(match).Count(int64(min(scanCount, limit-examined))).Type("stream").Build()).AsScanEntry()
			cancel()
			if err != nil {
				return nil, scan, fmt.Errorf("SCAN on %s: %w", addr, err)
			}
			for _, k := range e.Elements {
				seen[k] = true
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	scan.Keys = len(keys)
	return keys, scan, nil
}

// isReplica reports whether node says it is a replica (ROLE); on an error it is scanned.
func isReplica(ctx context.Context, node rueidis.Client) bool {
	cctx, cancel := callContext(ctx)
	defer cancel()
	role, err := node.Do(cctx, node.B().Role().Build()).ToArray()
	if err != nil || len(role) == 0 {
		return false
	}
	s, _ := role[0].ToString()
	return s == "slave" || s == "replica"
}

func printScanNote(out io.Writer, scan scanJSON) {
	if !scan.Complete {
		fmt.Fprintf(out, "\nthe scan stopped at --scan-limit on at least one of %d nodes: there may be more (raise --scan-limit or narrow --match)\n", scan.Nodes)
	}
}

func printStreams(out io.Writer, doc streamsJSON, tgt target) {
	fmt.Fprintf(out, "streams on %s\n", tgt.describe)
	if len(doc.Topics) == 0 {
		fmt.Fprintln(out, "(no stream found)")
	}
	for _, t := range doc.Topics {
		first, last := t.FirstID, t.LastID
		if first == "" {
			first, last = "-", "-"
		}
		fmt.Fprintf(out, "\n%s (stream %s): length %d, first %s, last %s, dead letters %d, scheduled %d\n", printable(t.Topic), printable(t.Stream), t.Length, first, last, t.DeadLetters, t.Scheduled)
		if len(t.Groups) == 0 {
			fmt.Fprintln(out, "  no consumer group")
			continue
		}
		const row = "  %-20s %9s %9s %9s  %s\n"
		fmt.Fprintf(out, row, "GROUP", "CONSUMERS", "PENDING", "LAG", "LAST DELIVERED")
		for _, g := range t.Groups {
			lag := "?"
			if g.LagKnown {
				lag = strconv.FormatInt(g.Lag, 10)
			}
			fmt.Fprintf(out, row, printable(g.Group), fmt.Sprint(g.Consumers), fmt.Sprint(g.Pending), lag, g.LastDeliveredID)
			for _, c := range g.ConsumerList {
				fmt.Fprintf(out, "      consumer %-28s pending %d, idle %s\n", printable(c.Consumer), c.Pending, (time.Duration(c.IdleMS) * time.Millisecond).String())
			}
		}
	}
	if doc.Scan != nil {
		printScanNote(out, *doc.Scan)
	}
}

// printable returns s for text output: as is when every rune is printable, else quoted, so
// a key, group or error text cannot carry terminal escape sequences or fake lines.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
