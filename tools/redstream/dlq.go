package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

func init() {
	registerCommand(command{
		name:    "dlq",
		summary: "dead letters: dlq topics|list|replay|delete|purge --redis host:port [--topic T] [--json]",
		run:     runDLQ,
	})
}

const dlqUsage = `usage: redstream dlq topics|list|replay|delete|purge [flags]

  topics   list the topics that have dead letters (a bounded SCAN of every master, see
           --scan-limit), with their counts and oldest/newest dead-letter ids
  list     print a topic's dead letters, oldest first (--topic, --count, --start)
  replay   move dead letters back onto the topic: --id ID (comma-separated), or --all:
           the dead letters that exist when the command starts, oldest first (at most
           --limit N), never the new dead letters of replays that fail again; each replay
           is atomic, and Ctrl-C stops between two
  delete   delete dead letters by id: --id ID (comma-separated)
  purge    delete every dead letter of the topic (asks for --yes)

A partitioned topic has one dead-letter stream per partition: give --partitions N and
--partition I (or its partition's stream key as --topic, e.g. '{orders:p0:52}').

--json prints one JSON document (field names in README "Operating: CLI and dashboards").

flags:
`

// maxListCount bounds dlq list --count: one reply of at most this many dead letters.
const maxListCount = 10000

// dlqFlags are the flags of one dlq subcommand.
type dlqFlags struct {
	conn      *connFlags
	topic     *string
	env       *string
	count     *int64
	start     *string
	ids       *string
	all       *bool
	limit     *int
	toAll     *bool
	yes       *bool
	asJSON    *bool
	match     *string
	scanLimit *int
	parts     *int
	part      *int
}

func newDLQFlags(name string, out io.Writer) (*flag.FlagSet, *dlqFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = usageFunc(fs, dlqUsage)
	f := &dlqFlags{conn: addConnFlags(fs, "127.0.0.1:6379", true, 30*time.Second)}
	f.topic = fs.String("topic", "", "topic (required except by topics)")
	f.env = fs.String("env", "", "environment suffix, when producers use env isolation")
	f.count = fs.Int64("count", 20, "list: most dead letters to print (at most 10000; page on with --start)")
	f.start = fs.String("start", "", "list: first dead-letter id")
	f.ids = fs.String("id", "", "replay, delete: dead-letter id(s), comma-separated")
	f.all = fs.Bool("all", false, "replay: every dead letter that exists when the command starts (see --limit)")
	f.limit = fs.Int("limit", 0, "replay --all: most dead letters to replay (0: all of them)")
	f.toAll = fs.Bool("all-groups", false, "replay: deliver to every consumer group, not only the one that failed")
	f.yes = fs.Bool("yes", false, "purge: really delete")
	f.asJSON = fs.Bool("json", false, "print one JSON document instead of text")
	f.match = fs.String("match", "*", "topics: SCAN MATCH pattern of the dead-letter stream keys")
	f.scanLimit = fs.Int("scan-limit", defaultScanLimit, "topics: most keys SCAN examines per node")
	f.parts = fs.Int("partitions", 0, "the topic's partition count (redis-stream.partitions), when partitioned")
	f.part = fs.Int("partition", 0, "with --partitions: the partition whose dead letters to act on, 0 to N-1")
	return fs, f
}

// runDLQ administers the dead-letter streams on a live Redis (or cluster).
func runDLQ(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs, _ := newDLQFlags("dlq", out)
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return nil
		}
		return errors.New("dlq: missing subcommand (topics, list, replay, delete or purge)")
	}
	sub := args[0]
	switch sub {
	case "topics", "list", "replay", "delete", "purge":
	default:
		fs, _ := newDLQFlags("dlq", out)
		fs.Usage()
		return fmt.Errorf("dlq: unknown subcommand %q", sub)
	}
	fs, f := newDLQFlags("dlq "+sub, out)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("dlq %s: unexpected argument %q", sub, fs.Arg(0))
	}
	if *f.topic == "" && sub != "topics" {
		return fmt.Errorf("dlq %s: --topic is required", sub)
	}
	switch {
	case *f.count < 1 || *f.count > maxListCount:
		return fmt.Errorf("dlq %s: --count %d, want 1 to %d", sub, *f.count, maxListCount)
	case *f.limit < 0:
		return fmt.Errorf("dlq %s: --limit %d, want 0 (all) or more", sub, *f.limit)
	case *f.scanLimit < 1:
		return fmt.Errorf("dlq %s: --scan-limit %d, want at least 1", sub, *f.scanLimit)
	}
	switch ids := splitIDs(*f.ids); {
	case sub == "delete" && len(ids) == 0:
		return errors.New("dlq delete: give --id ID (comma-separated)")
	case sub == "replay" && *f.all && len(ids) > 0:
		return errors.New("dlq replay: give --id or --all, not both")
	case sub == "replay" && !*f.all && len(ids) == 0:
		return errors.New("dlq replay: give --id ID or --all")
	}
	cfg := stream.Config{EnvIsolation: *f.env != "", Env: *f.env}
	if *f.parts > 1 && sub != "topics" {
		// A partition's stream is addressed as a topic of its own: its key, no env suffix.
		if *f.part < 0 || *f.part >= *f.parts {
			return fmt.Errorf("dlq %s: --partition %d, want 0 to %d", sub, *f.part, *f.parts-1)
		}
		cfg.Partitions = map[string]int{*f.topic: *f.parts}
		streams, err := stream.PartitionStreams(cfg, *f.topic)
		if err != nil {
			return fmt.Errorf("dlq %s: --topic, --partitions: %w", sub, err)
		}
		*f.topic, cfg = streams[*f.part], stream.Config{}
	} else if *f.part != 0 || *f.parts < 0 {
		return fmt.Errorf("dlq %s: --partition needs --partitions of 2 or more", sub)
	}
	var name string
	if sub != "topics" {
		var err error
		if name, err = streamwire.StreamKey(*f.topic, cfg.EnvIsolation, cfg.Env); err != nil {
			return fmt.Errorf("dlq %s: --topic: %w", sub, err)
		}
	}
	if _, err := f.conn.resolve(); err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	client, tgt, err := f.conn.client(ctx)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	defer client.Close()
	dlq, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		return err
	}
	if sub == "topics" {
		return dlqTopics(ctx, client, f, out, tgt)
	}
	var opts []stream.ReplayOption
	if *f.toAll {
		opts = append(opts, stream.ToAllGroups())
	}
	switch sub {
	case "list":
		return dlqList(ctx, dlq, f, name, out)
	case "replay":
		return dlqReplay(ctx, dlq, f, name, out, opts)
	case "delete":
		ids := splitIDs(*f.ids)
		if len(ids) == 0 {
			return errors.New("dlq delete: give --id ID (comma-separated)")
		}
		n, err := dlq.Delete(ctx, *f.topic, ids...)
		if err != nil {
			return err
		}
		if *f.asJSON {
			err = writeJSON(out, dlqDeleteJSON{Stream: name, DeadLetterStream: streamwire.DeadLetterStreamName(name), Requested: ids, Deleted: n})
		} else {
			fmt.Fprintf(out, "deleted %d of %d dead letters of %s\n", n, len(ids), name)
		}
		if err == nil && n == 0 {
			// Nothing matched: a mistyped id or topic must not look like success.
			err = fmt.Errorf("dlq delete: no dead letter of %s has the id %s", name, strings.Join(ids, ", "))
		}
		return err
	case "purge":
		if !*f.yes {
			n, err := dlq.Len(ctx, *f.topic)
			if err != nil {
				return err
			}
			return fmt.Errorf("dlq purge: would delete %d dead letters of %s; add --yes", n, name)
		}
		n, err := dlq.Purge(ctx, *f.topic)
		if err != nil {
			return err
		}
		if *f.asJSON {
			return writeJSON(out, dlqPurgeJSON{Stream: name, DeadLetterStream: streamwire.DeadLetterStreamName(name), Purged: n})
		}
		fmt.Fprintf(out, "purged %d dead letters of %s\n", n, name)
		return nil
	}
	return nil
}

func splitIDs(s string) []string {
	var ids []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// JSON documents of dlq. Field names are part of the CLI's interface (README).
type (
	dlqListJSON struct {
		Stream           string           `json:"stream"`
		DeadLetterStream string           `json:"dead_letter_stream"`
		Total            int64            `json:"total"`
		DeadLetters      []deadLetterJSON `json:"dead_letters"`
	}
	deadLetterJSON struct {
		ID         string            `json:"id"`
		OriginalID string            `json:"original_id"`
		Group      string            `json:"group"`
		Consumer   string            `json:"consumer"`
		Deliveries int64             `json:"deliveries"`
		Error      string            `json:"error"`
		Time       string            `json:"time"` // RFC 3339, UTC, milliseconds
		Key        string            `json:"key"`
		Tag        string            `json:"tag"`
		Fields     map[string]string `json:"fields"`
		Body       json.RawMessage   `json:"body,omitempty"`       // the decoded body, when it is JSON
		BodyText   *string           `json:"body_text,omitempty"`  // the decoded body, when it is not JSON
		BodyError  string            `json:"body_error,omitempty"` // why the body could not be decoded
	}
	dlqReplayJSON struct {
		Stream   string         `json:"stream"`
		Replayed int            `json:"replayed"`
		Entries  []replayedJSON `json:"entries,omitempty"` // with --id
		Error    string         `json:"error,omitempty"`   // set when the command stopped on an error
	}
	replayedJSON struct {
		ID    string `json:"id"`
		NewID string `json:"new_id"`
	}
	dlqDeleteJSON struct {
		Stream           string   `json:"stream"`
		DeadLetterStream string   `json:"dead_letter_stream"`
		Requested        []string `json:"requested"`
		Deleted          int64    `json:"deleted"`
	}
	dlqPurgeJSON struct {
		Stream           string `json:"stream"`
		DeadLetterStream string `json:"dead_letter_stream"`
		Purged           int64  `json:"purged"`
	}
	dlqTopicsJSON struct {
		Topics []dlqTopicJSON `json:"topics"`
		Scan   scanJSON       `json:"scan"`
	}
	dlqTopicJSON struct {
		Topic            string `json:"topic"`
		Stream           string `json:"stream"`
		DeadLetterStream string `json:"dead_letter_stream"`
		DeadLetters      int64  `json:"dead_letters"`
		OldestID         string `json:"oldest_id"`
		NewestID         string `json:"newest_id"`
	}
)

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func toDeadLetterJSON(dl stream.DeadLetter) deadLetterJSON {
	j := deadLetterJSON{ID: dl.ID, OriginalID: dl.OriginalID, Group: dl.Group, Consumer: dl.Consumer,
		Deliveries: dl.Deliveries, Error: dl.Error, Key: dl.Fields[streamwire.FieldKey], Tag: dl.Fields[streamwire.FieldTag], Fields: dl.Fields}
	if !dl.Time.IsZero() {
		j.Time = dl.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	body, err := dl.Body()
	switch {
	case err != nil:
		j.BodyError = err.Error()
	case json.Valid(body):
		j.Body = body
	default:
		s := string(body)
		j.BodyText = &s
	}
	return j
}

func dlqList(ctx context.Context, dlq *stream.DeadLetters, f *dlqFlags, name string, out io.Writer) error {
	n, err := dlq.Len(ctx, *f.topic)
	if err != nil {
		return err
	}
	letters, err := dlq.List(ctx, *f.topic, stream.ListOptions{Start: *f.start, Count: *f.count})
	if err != nil {
		return err
	}
	if *f.asJSON {
		doc := dlqListJSON{Stream: name, DeadLetterStream: streamwire.DeadLetterStreamName(name), Total: n, DeadLetters: []deadLetterJSON{}}
		for _, dl := range letters {
			doc.DeadLetters = append(doc.DeadLetters, toDeadLetterJSON(dl))
		}
		return writeJSON(out, doc)
	}
	fmt.Fprintf(out, "%s: %d dead letters\n", printable(streamwire.DeadLetterStreamName(name)), n)
	for _, dl := range letters {
		body, err := dl.Body()
		if err != nil {
			body = []byte(fmt.Sprintf("(undecodable: %v) %q", err, dl.Fields[streamwire.FieldBody]))
		}
		fmt.Fprintf(out, "%s  original=%s group=%s consumer=%s deliveries=%d at=%s\n    key=%s tag=%s error=%s\n    body=%s\n",
			dl.ID, dl.OriginalID, printable(dl.Group), printable(dl.Consumer), dl.Deliveries, dl.Time.UTC().Format(time.RFC3339),
			printable(dl.Fields[streamwire.FieldKey]), printable(dl.Fields[streamwire.FieldTag]), printable(dl.Error), printable(string(body)))
	}
	return nil
}

func dlqReplay(ctx context.Context, dlq *stream.DeadLetters, f *dlqFlags, name string, out io.Writer, opts []stream.ReplayOption) error {
	doc := dlqReplayJSON{Stream: name}
	finish := func(err error) error {
		if *f.asJSON {
			if err != nil {
				doc.Error = err.Error()
			}
			if jerr := writeJSON(out, doc); jerr != nil {
				return jerr
			}
		}
		return err
	}
	ids := splitIDs(*f.ids)
	switch {
	case *f.all && len(ids) > 0:
		return errors.New("dlq replay: give --id or --all, not both")
	case *f.all:
		n, err := dlq.ReplayAll(ctx, *f.topic, *f.limit, opts...)
		doc.Replayed = n
		if !*f.asJSON {
			if err != nil {
				fmt.Fprintf(out, "replayed %d dead letters onto %s, then stopped\n", n, name)
			} else {
				fmt.Fprintf(out, "replayed %d dead letters onto %s\n", n, name)
			}
		}
		return finish(err)
	case len(ids) > 0:
		for _, id := range ids {
			newID, err := dlq.Replay(ctx, *f.topic, id, opts...)
			if err != nil {
				return finish(err)
			}
			doc.Replayed++
			doc.Entries = append(doc.Entries, replayedJSON{ID: id, NewID: newID})
			if !*f.asJSON {
				fmt.Fprintf(out, "replayed %s onto %s as %s\n", id, name, newID)
			}
		}
		return finish(nil)
	}
	return errors.New("dlq replay: give --id ID or --all")
}

// dlqTopics lists the topics that have dead letters.
func dlqTopics(ctx context.Context, client rueidis.Client, f *dlqFlags, out io.Writer, tgt target) error {
	match := *f.match
	if !strings.HasSuffix(match, ":dlq") && !strings.HasSuffix(match, "*") {
		match += ":dlq"
	}
	keys, scan, err := scanStreamKeys(ctx, client, match, *f.scanLimit)
	if err != nil {
		return fmt.Errorf("dlq topics: %w", err)
	}
	existing := map[string]bool{}
	for _, k := range keys {
		existing[k] = true
	}
	doc := dlqTopicsJSON{Topics: []dlqTopicJSON{}, Scan: scan}
	for _, k := range keys {
		streamKey, ok := streamOfDeadLetterKey(k, existing)
		if !ok {
			continue
		}
		topic, ok := topicOfStream(streamKey, *f.env)
		if !ok {
			continue
		}
		t := dlqTopicJSON{Topic: topic, Stream: streamKey, DeadLetterStream: k}
		cctx, cancel := callContext(ctx)
		res := client.DoMulti(cctx,
			client.B().Xlen().Key(k).Build(),
			client.B().Xrange().Key(k).Start("-").End("+").Count(1).Build(),
			client.B().Xrevrange().Key(k).End("+").Start("-").Count(1).Build())
		cancel()
		for _, r := range res {
			if err := r.Error(); err != nil {
				return fmt.Errorf("dlq topics: read %s: %w", k, err)
			}
		}
		t.DeadLetters, _ = res[0].AsInt64()
		if t.DeadLetters == 0 {
			continue
		}
		t.OldestID = firstEntryID(res[1])
		t.NewestID = firstEntryID(res[2])
		doc.Topics = append(doc.Topics, t)
	}
	if *f.asJSON {
		return writeJSON(out, doc)
	}
	fmt.Fprintf(out, "topics with dead letters on %s\n", tgt.describe)
	const row = "%-24s %-28s %12s  %-22s %-22s\n"
	fmt.Fprintf(out, row, "TOPIC", "DEAD-LETTER STREAM", "DEAD LETTERS", "OLDEST", "NEWEST")
	for _, t := range doc.Topics {
		fmt.Fprintf(out, row, printable(t.Topic), printable(t.DeadLetterStream), fmt.Sprint(t.DeadLetters), t.OldestID, t.NewestID)
	}
	if len(doc.Topics) == 0 {
		fmt.Fprintln(out, "(none)")
	}
	printScanNote(out, scan)
	return nil
}

// firstEntryID returns the id of the first entry of an XRANGE reply, or "".
func firstEntryID(r rueidis.RedisResult) string {
	es, err := r.AsXRange()
	if err != nil || len(es) == 0 {
		return ""
	}
	return es[0].ID
}

// streamOfDeadLetterKey returns the topic stream of dead-letter stream key k, the inverse
// of streamwire.DeadLetterStreamName: "{orders}:dlq" is the dead-letter stream of "orders",
// "{shop}orders:dlq" of "{shop}orders". A stream literally named "{orders}" shares
// "orders"'s dead-letter stream; existing (the scanned keys) picks it when only it exists.
func streamOfDeadLetterKey(k string, existing map[string]bool) (string, bool) {
	base, ok := strings.CutSuffix(k, ":dlq")
	if !ok || base == "" {
		return "", false
	}
	if strings.HasPrefix(base, "{") && strings.HasSuffix(base, "}") && strings.Count(base, "{") == 1 && strings.Count(base, "}") == 1 {
		inner := base[1 : len(base)-1]
		if inner == "" {
			return "", false
		}
		if !existing[inner] && existing[base] {
			return base, true
		}
		return inner, true
	}
	if streamwire.DeadLetterStreamName(base) != k {
		return "", false
	}
	return base, true
}

// topicOfStream returns the topic of stream key s under env isolation suffix env ("" for
// none), and false when s is not a stream of that environment.
func topicOfStream(s, env string) (string, bool) {
	if env == "" {
		return s, true
	}
	t, ok := strings.CutSuffix(s, "_"+env)
	return t, ok && t != ""
}
