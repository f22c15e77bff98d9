// Command redstream is redstream's command-line tool: a demo on the embedded default (no
// Redis needed), conformance suites against any Redis-compatible server, and operator tools.
//
// Usage:
//
//	redstream demo                 run every demo on the embedded default
//	redstream demo NAME...         run the named demos
//	redstream config check FILE    print the effective configuration of FILE, or its errors
//	redstream streams [--topic T]  topics, consumer groups, consumers, pending and lag
//	redstream dlq topics           topics that have dead letters
//	redstream dlq list|replay|delete|purge --topic T
//	                               inspect, replay and delete a topic's dead letters
//	redstream periodic list|pause|resume|remove [--topic T] [--name N]
//	                               the periodic schedules of package stream/periodic
//	redstream console              serve the operator web console (--demo: on the embedded default)
//	redstream conformance          prove the Redis engines equal to core on a server
//	redstream help                 list the commands
//
// Every command that talks to Redis takes the same connection flags (--redis, --url or
// $REDIS_URL, --cluster, --tls, --tls-ca, --tls-cert, --tls-key, --user, --password or
// $REDIS_PASSWORD, --db, --timeout) and --help lists them with their defaults. streams, dlq,
// periodic list and conformance print JSON with --json.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. run gets the arguments after the command's name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, out io.Writer) error
}

// demo is one part of `redstream demo`. Demos run in order of their order field.
type demo struct {
	name    string
	summary string
	order   int
	run     func(ctx context.Context, out io.Writer) error
}

var (
	commands = map[string]command{}
	demos    []demo
)

func registerCommand(c command) { commands[c.name] = c }

func registerDemo(d demo) { demos = append(demos, d) }

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// COMMAND --help: the flag set has printed the command's usage; asking is no failure.
	case errors.Is(err, errNoCommand):
		fmt.Fprintln(os.Stderr, "redstream:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "redstream:", err)
		os.Exit(1)
	}
}

// errNoCommand is run's error when it is given no command (exit status 2, as for any usage
// error of a command-line tool).
var errNoCommand = errors.New("no command given (redstream help lists them)")

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		usage(out)
		return errNoCommand
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(out)
		return nil
	}
	if args[0] == "demo" {
		return runDemos(ctx, args[1:], out)
	}
	c, ok := commands[args[0]]
	if !ok {
		usage(out)
		return fmt.Errorf("unknown command %q", args[0])
	}
	return c.run(ctx, args[1:], out)
}

func usage(out io.Writer) {
	fmt.Fprintln(out, "usage: redstream COMMAND [ARGS]")
	fmt.Fprintln(out, "\n  demo [NAME...]   run the demos on the embedded default (no Redis needed)")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(out, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(out, "\nCOMMAND --help lists a command's flags; commands that talk to Redis share --redis, --url ($REDIS_URL),")
	fmt.Fprintln(out, "--cluster, --tls*, --user, --password ($REDIS_PASSWORD), --db and --timeout.")
	fmt.Fprintln(out, "\ndemos:")
	for _, d := range sortedDemos() {
		fmt.Fprintf(out, "  %-16s %s\n", d.name, d.summary)
	}
}

func sortedDemos() []demo {
	ds := append([]demo(nil), demos...)
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].order < ds[j].order })
	return ds
}

func runDemos(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	if err := fs.Parse(args); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, a := range fs.Args() {
		want[a] = true
	}
	ran := 0
	for _, d := range sortedDemos() {
		if len(want) > 0 && !want[d.name] {
			continue
		}
		fmt.Fprintf(out, "\n== %s: %s\n", d.name, d.summary)
		if err := d.run(ctx, out); err != nil {
			return fmt.Errorf("demo %s: %w", d.name, err)
		}
		ran++
	}
	if ran == 0 {
		return fmt.Errorf("no demo matches %v", fs.Args())
	}
	return nil
}
