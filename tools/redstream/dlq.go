package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/stream"
)

func init() {
	registerCommand(command{
		name:    "dlq",
		summary: "dead letters of a stream topic: dlq list|replay|purge --redis host:port --topic T",
		run:     runDLQ,
	})
}

const dlqUsage = `usage: redstream dlq list|replay|purge --redis host:port --topic T [flags]

  list     print the topic's dead letters, oldest first (--count, --start)
  replay   move dead letters back onto the topic: --id ID (comma-separated), or --all:
           the dead letters that exist when the command starts, oldest first (at most
           --limit N), never the new dead letters of replays that fail again; each replay
           is atomic, and Ctrl-C stops between two
  purge    delete every dead letter of the topic (asks for --yes)

flags:
`

// runDLQ administers the dead-letter stream of one topic on a live Redis (or cluster).
func runDLQ(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(out, dlqUsage)
		return errors.New("dlq: missing subcommand (list, replay or purge)")
	}
	sub := args[0]
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, dlqUsage); fs.PrintDefaults() }
	addr := fs.String("redis", "127.0.0.1:6379", "Redis address host:port (a cluster seed works too)")
	password := fs.String("password", "", "Redis password")
	topic := fs.String("topic", "", "topic (required)")
	env := fs.String("env", "", "environment suffix, when producers use env isolation")
	count := fs.Int64("count", 20, "list: most dead letters to print")
	start := fs.String("start", "", "list: first dead-letter id")
	ids := fs.String("id", "", "replay: dead-letter id(s), comma-separated")
	all := fs.Bool("all", false, "replay: every dead letter that exists when the command starts (see --limit)")
	limit := fs.Int("limit", 0, "replay --all: most dead letters to replay (0: all of them)")
	toAll := fs.Bool("all-groups", false, "replay: deliver to every consumer group, not only the one that failed")
	yes := fs.Bool("yes", false, "purge: really delete")
	timeout := fs.Duration("timeout", 30*time.Second, "overall timeout (each Redis call is also bounded by 10s)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *topic == "" {
		return errors.New("dlq: --topic is required")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, Password: *password, DisableCache: true})
	if err != nil {
		return fmt.Errorf("dlq: connect %s: %w", *addr, err)
	}
	defer client.Close()
	cfg := stream.Config{EnvIsolation: *env != "", Env: *env}
	dlq, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		return err
	}
	name, err := stream.StreamName(cfg, *topic)
	if err != nil {
		return err
	}
	var opts []stream.ReplayOption
	if *toAll {
		opts = append(opts, stream.ToAllGroups())
	}
	switch sub {
	case "list":
		n, err := dlq.Len(ctx, *topic)
		if err != nil {
			return err
		}
		letters, err := dlq.List(ctx, *topic, stream.ListOptions{Start: *start, Count: *count})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %d dead letters\n", stream.DeadLetterStreamName(name), n)
		for _, dl := range letters {
			body, err := dl.Body()
			if err != nil {
				body = []byte(fmt.Sprintf("(undecodable: %v) %q", err, dl.Fields[stream.FieldBody]))
			}
			fmt.Fprintf(out, "%s  original=%s group=%s consumer=%s deliveries=%d at=%s\n    key=%s tag=%s error=%s\n    body=%s\n",
				dl.ID, dl.OriginalID, dl.Group, dl.Consumer, dl.Deliveries, dl.Time.UTC().Format(time.RFC3339),
				dl.Fields[stream.FieldKey], dl.Fields[stream.FieldTag], dl.Error, body)
		}
		return nil
	case "replay":
		switch {
		case *all && *ids != "":
			return errors.New("dlq replay: give --id or --all, not both")
		case *all:
			n, err := dlq.ReplayAll(ctx, *topic, *limit, opts...)
			if err != nil {
				fmt.Fprintf(out, "replayed %d dead letters onto %s, then stopped\n", n, name)
				return err
			}
			fmt.Fprintf(out, "replayed %d dead letters onto %s\n", n, name)
			return nil
		case *ids != "":
			for _, id := range strings.Split(*ids, ",") {
				newID, err := dlq.Replay(ctx, *topic, strings.TrimSpace(id), opts...)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "replayed %s onto %s as %s\n", id, name, newID)
			}
			return nil
		}
		return errors.New("dlq replay: give --id ID or --all")
	case "purge":
		if !*yes {
			n, err := dlq.Len(ctx, *topic)
			if err != nil {
				return err
			}
			return fmt.Errorf("dlq purge: would delete %d dead letters of %s; add --yes", n, name)
		}
		n, err := dlq.Purge(ctx, *topic)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "purged %d dead letters of %s\n", n, name)
		return nil
	}
	fmt.Fprint(out, dlqUsage)
	return fmt.Errorf("dlq: unknown subcommand %q", sub)
}
