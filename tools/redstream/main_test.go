package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestDemo runs `redstream demo` exactly as a newcomer would, on the embedded default.
func TestDemo(t *testing.T) {
	if len(demos) == 0 {
		t.Fatal("no demo is registered")
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"demo"}, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, d := range demos {
		if !strings.Contains(out.String(), "== "+d.name+": ") {
			t.Errorf("demo %q did not run; output:\n%s", d.name, out.String())
		}
	}
	t.Logf("demo output:\n%s", out.String())
}

func TestUnknownCommand(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"no-such-command"}, &out)
	if err == nil || !strings.Contains(err.Error(), "no-such-command") {
		t.Fatalf("got %v, want an error naming the command", err)
	}
	if !strings.Contains(out.String(), "usage: redstream") {
		t.Fatalf("no usage printed: %q", out.String())
	}
}

func TestUnknownDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"demo", "no-such-demo"}, &out); err == nil {
		t.Fatal("an unknown demo name succeeded")
	}
}

// TestNoCommand: redstream without a command prints its usage and fails (exit status 2 in
// main), so a script that forgot the command does not pass silently.
func TestNoCommand(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), nil, &out)
	if !errors.Is(err, errNoCommand) {
		t.Fatalf("run() = %v, want errNoCommand", err)
	}
	if !strings.Contains(out.String(), "usage: redstream COMMAND") {
		t.Errorf("run() printed %q, want the usage", out.String())
	}
}
