package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemoMemory checks that the memory demo shows each seed behaviour.
func TestDemoMemory(t *testing.T) {
	var out bytes.Buffer
	if err := demoMemory(context.Background(), &out); err != nil {
		t.Fatalf("demoMemory: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"t+500ms DENIED (retry in 500ms)", // sliding window: the 6th is denied
		"t+1s ok (0 left)",                // ...and admitted once the first is a window old
		"t+0s DENIED (retry in 200ms)",    // token bucket: the 11th of the burst
		"t+200ms ok (0 left)",             // ...one more every 200 ms
		"t+0s ok, wait 1s before sending", // leaky bucket: Delay shapes
		"t+1s ok, wait 1s before sending", //
		"t+0s DENIED (retry in 1s)",       // ...and the 3rd is denied
		"bloom    order-1 new, order-2 new, order-1 duplicate; unique 2",
		"t+1h29m0s   order-1 duplicate=true", // a duplicate sighting refreshed last-seen
		"t+2h30m0s   order-1 duplicate=false",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
