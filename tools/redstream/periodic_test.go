package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream/periodic"
)

// TestPeriodicCommand drives `redstream periodic` against a real redis-server: a running
// schedule is listed, paused, resumed and removed.
func TestPeriodicCommand(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	s, err := periodic.New(client, periodic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, periodic.Schedule{Name: "nightly", Topic: "reports", Cron: "0 0 3 * * *", TimeZone: "Europe/Paris", Missed: periodic.MissedOne}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, periodic.Schedule{Name: "beat", Topic: "reports", Every: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)

	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"periodic"}, append(args, "--redis", srv.Addr)...), &out)
		return out.String(), err
	}
	list := func() []periodicJSON {
		t.Helper()
		out, err := cli("list", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rows []periodicJSON
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return rows
	}
	rows := list()
	if len(rows) != 2 || rows[0].Name != "beat" || rows[0].EveryMs != 50 || rows[1].Name != "nightly" ||
		rows[1].Cron != "0 0 3 * * *" || rows[1].TimeZone != "Europe/Paris" || rows[1].Missed != "one" || rows[1].Next == "" {
		t.Fatalf("list = %+v", rows)
	}
	if out, err := cli("list", "--topic", "reports"); err != nil || !strings.Contains(out, "every 50ms") || !strings.Contains(out, "0 0 3 * * * (Europe/Paris)") {
		t.Fatalf("list text = %q, %v", out, err)
	}
	if out, err := cli("pause", "--topic", "reports", "--name", "beat"); err != nil || !strings.Contains(out, "paused") {
		t.Fatalf("pause = %q, %v", out, err)
	}
	if rows := list(); !rows[0].Paused {
		t.Fatalf("after pause: %+v", rows[0])
	}
	if _, err := cli("resume", "--topic", "reports", "--name", "beat"); err != nil {
		t.Fatal(err)
	}
	if rows := list(); rows[0].Paused {
		t.Fatalf("after resume: %+v", rows[0])
	}
	if _, err := cli("remove", "--topic", "reports", "--name", "beat"); err != nil {
		t.Fatal(err)
	}
	if rows := list(); len(rows) != 1 || rows[0].Name != "nightly" {
		t.Fatalf("after remove: %+v", rows)
	}
	if _, err := cli("remove", "--topic", "reports", "--name", "beat"); !errors.Is(err, periodic.ErrNotFound) {
		t.Fatalf("second remove = %v, want ErrNotFound", err)
	}
	if _, err := cli("pause", "--topic", "reports"); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("pause without --name = %v", err)
	}
	if _, err := cli("frobnicate"); err == nil {
		t.Fatal("unknown subcommand accepted")
	}
}
