package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redstream-go/redstream/stream"
)

func init() {
	registerCommand(command{
		name:    "result",
		summary: "an entry's result record: result --redis host:port --topic T --group G --id ID [--wait D] [--json]",
		run:     runResult,
	})
}

const resultUsage = `usage: redstream result --topic T --group G --id ID [flags]

Prints the result record a handler of group G recorded for entry ID of topic T
(stream.Handler.Results): its state (active, completed or failed), the latest progress
report, the result or the dead-letter reason, the delivery that wrote it and when.
--wait D waits up to D for the entry to complete or fail (exit 1 if it does not).
Exits 1 when there is no record.

flags:
`

// resultJSON is result --json.
type resultJSON struct {
	ID            string `json:"id"`
	Key           string `json:"key"`
	State         string `json:"state"`
	Progress      string `json:"progress,omitempty"`
	Result        string `json:"result,omitempty"`
	Error         string `json:"error,omitempty"`
	DeliveryCount int64  `json:"delivery_count"`
	Updated       string `json:"updated"`
}

// runResult reads (or waits for) one entry's result record on a live Redis.
func runResult(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("result", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = usageFunc(fs, resultUsage)
	conn := addConnFlags(fs, "127.0.0.1:6379", true, 30*time.Second)
	topic := fs.String("topic", "", "topic (required)")
	group := fs.String("group", "", "consumer group whose handler recorded it (required)")
	id := fs.String("id", "", "entry id, as Send returned it (required)")
	env := fs.String("env", "", "environment suffix, when producers use env isolation")
	wait := fs.Duration("wait", 0, "wait up to this long for the entry to complete or fail")
	asJSON := fs.Bool("json", false, "print one JSON document")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("result: unexpected argument %q", fs.Arg(0))
	}
	if *topic == "" || *group == "" || *id == "" {
		return errors.New("result: --topic, --group and --id are required")
	}
	if *wait < 0 {
		return fmt.Errorf("result: --wait %v: want 0 or more", *wait)
	}
	if _, err := conn.resolve(); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, conn.timeout+*wait)
	defer cancel()
	client, _, err := conn.client(cctx)
	if err != nil {
		return fmt.Errorf("result: %w", err)
	}
	defer client.Close()
	p, err := stream.NewProducer(client, stream.Config{EnvIsolation: *env != "", Env: *env, SendTimeout: maxCallTimeout})
	if err != nil {
		return err
	}
	var r stream.Result
	if *wait > 0 {
		wctx, wcancel := context.WithTimeout(cctx, *wait)
		r, err = p.WaitResult(wctx, *topic, *group, *id)
		wcancel()
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("result: entry %s of %s/%s not done after %v (state %q)", *id, *topic, *group, *wait, r.State)
		}
	} else {
		r, err = p.Result(cctx, *topic, *group, *id)
	}
	if err != nil {
		return err
	}
	row := resultJSON{ID: r.ID, Key: r.Key, State: string(r.State), Progress: string(r.Progress), Result: string(r.Value),
		Error: r.Error, DeliveryCount: r.DeliveryCount, Updated: r.Updated.UTC().Format(time.RFC3339Nano)}
	if *asJSON {
		return writeJSON(out, row)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "entry %s of %s/%s (key %q): %s, by delivery %d at %s\n", row.ID, *topic, *group, row.Key, row.State, row.DeliveryCount, row.Updated)
	if row.Progress != "" {
		fmt.Fprintf(&b, "progress: %s\n", row.Progress)
	}
	if row.Result != "" {
		fmt.Fprintf(&b, "result:   %s\n", row.Result)
	}
	if row.Error != "" {
		fmt.Fprintf(&b, "error:    %s\n", row.Error)
	}
	_, err = io.WriteString(out, b.String())
	return err
}
