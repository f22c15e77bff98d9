package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/periodic"
)

func init() {
	registerCommand(command{
		name:    "periodic",
		summary: "periodic schedules: periodic list|pause|resume|remove --redis host:port [--topic T] [--name N] [--json]",
		run:     runPeriodic,
	})
}

const periodicUsage = `usage: redstream periodic list|pause|resume|remove [flags]

  list     print the registered schedules (of --topic, or of every topic): definition,
           paused or not, the latest decided tick, the next one, ticks sent, sent late
           and skipped
  pause    pause a schedule in every process (--topic, --name): its ticks pass unsent
  resume   resume a paused schedule: its next tick is sent
  remove   delete a schedule's definition and state; processes delivering it stop at
           their next tick, until one adds it again

--json prints one JSON document.

flags:
`

// periodicJSON is one schedule in periodic list --json.
type periodicJSON struct {
	Topic      string `json:"topic"`
	Name       string `json:"name"`
	Cron       string `json:"cron,omitempty"`
	EveryMs    int64  `json:"every_ms,omitempty"`
	TimeZone   string `json:"time_zone,omitempty"`
	Missed     string `json:"missed"`
	MaxCatchUp int    `json:"max_catch_up,omitempty"`
	Paused     bool   `json:"paused"`
	Last       string `json:"last,omitempty"`
	Next       string `json:"next,omitempty"`
	Sent       int64  `json:"sent"`
	CaughtUp   int64  `json:"caught_up"`
	Skipped    int64  `json:"skipped"`
}

// runPeriodic administers the schedules of package stream/periodic on a live Redis.
func runPeriodic(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("periodic", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = usageFunc(fs, periodicUsage)
	conn := addConnFlags(fs, "127.0.0.1:6379", true, 30*time.Second)
	topic := fs.String("topic", "", "topic (required except by list)")
	name := fs.String("name", "", "pause, resume, remove: the schedule's name")
	env := fs.String("env", "", "environment suffix, when producers use env isolation")
	asJSON := fs.Bool("json", false, "list: print one JSON document instead of text")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return nil
		}
		return errors.New("periodic: missing subcommand (list, pause, resume or remove)")
	}
	sub := args[0]
	switch sub {
	case "list", "pause", "resume", "remove":
	default:
		fs.Usage()
		return fmt.Errorf("periodic: unknown subcommand %q", sub)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("periodic %s: unexpected argument %q", sub, fs.Arg(0))
	}
	if sub != "list" && (*topic == "" || *name == "") {
		return fmt.Errorf("periodic %s: --topic and --name are required", sub)
	}
	if _, err := conn.resolve(); err != nil {
		return fmt.Errorf("periodic: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, conn.timeout)
	defer cancel()
	client, _, err := conn.client(ctx)
	if err != nil {
		return fmt.Errorf("periodic: %w", err)
	}
	defer client.Close()
	s, err := periodic.New(client, periodic.Options{Stream: stream.Config{EnvIsolation: *env != "", Env: *env}, Timeout: maxCallTimeout})
	if err != nil {
		return err
	}
	switch sub {
	case "pause":
		err = s.Pause(ctx, *topic, *name)
	case "resume":
		err = s.Resume(ctx, *topic, *name)
	case "remove":
		err = s.Remove(ctx, *topic, *name)
	default:
		return periodicList(ctx, s, *topic, *asJSON, out)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: schedule %q of topic %q\n", map[string]string{"pause": "paused", "resume": "resumed", "remove": "removed"}[sub], *name, *topic)
	return nil
}

// periodicList prints the schedules of topic ("" for all).
func periodicList(ctx context.Context, s *periodic.Scheduler, topic string, asJSON bool, out io.Writer) error {
	infos, err := s.List(ctx, topic)
	if err != nil {
		return err
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	rows := make([]periodicJSON, 0, len(infos))
	for _, i := range infos {
		rows = append(rows, periodicJSON{Topic: i.Topic, Name: i.Name, Cron: i.Cron, EveryMs: i.Every.Milliseconds(),
			TimeZone: i.TimeZone, Missed: string(i.Missed), MaxCatchUp: i.MaxCatchUp, Paused: i.Paused,
			Last: when(i.Last), Next: when(i.Next), Sent: i.Sent, CaughtUp: i.CaughtUp, Skipped: i.Skipped})
	}
	if asJSON {
		return writeJSON(out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(out, "no schedules")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tNAME\tWHEN\tMISSED\tPAUSED\tLAST\tNEXT\tSENT\tLATE\tSKIPPED")
	for _, r := range rows {
		spec := r.Cron
		if r.TimeZone != "" {
			spec += " (" + r.TimeZone + ")"
		}
		if r.EveryMs != 0 {
			spec = "every " + (time.Duration(r.EveryMs) * time.Millisecond).String()
		}
		missed := r.Missed
		if missed == "" {
			missed = string(periodic.MissedSkip)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%s\t%s\t%d\t%d\t%d\n", r.Topic, r.Name, spec, missed, r.Paused, r.Last, r.Next, r.Sent, r.CaughtUp, r.Skipped)
	}
	return w.Flush()
}
