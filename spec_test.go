package redstream_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// TestAlgorithmsAreTheRegistry: redstream.Algorithms is core's registry, and every
// Algorithm constant names a row of it.
func TestAlgorithmsAreTheRegistry(t *testing.T) {
	var want []redstream.Algorithm
	for _, a := range core.Algorithms() {
		want = append(want, redstream.Algorithm(a.Name))
	}
	if got := redstream.Algorithms(); !slices.Equal(got, want) {
		t.Fatalf("Algorithms() = %v, want the registry's %v", got, want)
	}
	for _, a := range []redstream.Algorithm{redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket,
		redstream.AlgorithmSlidingWindow, redstream.AlgorithmSlidingCounter, redstream.AlgorithmFixedWindow} {
		if _, err := core.Lookup(string(a)); err != nil {
			t.Errorf("constant %q: %v", a, err)
		}
	}
}

// TestSpecShapes ranges over the registry: a spec reads the fields of its algorithm's shape
// only, and an unknown algorithm is ErrInvalidConfig everywhere, never a window.
func TestSpecShapes(t *testing.T) {
	for _, a := range redstream.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			row, err := core.Lookup(string(a))
			if err != nil {
				t.Fatal(err)
			}
			sh := row.Shape
			bucket := redstream.Spec{Algorithm: a, Capacity: 10, Rate: 5}
			window := redstream.Spec{Algorithm: a, Window: time.Second, Limit: 10}
			good, bad := bucket, window
			if sh == core.Window {
				good, bad = window, bucket
			}
			if _, err := good.Core(); err != nil {
				t.Fatalf("%v: %v", good, err)
			}
			if _, err := bad.Core(); !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("%v (the other shape's fields): %v, want ErrInvalidConfig", bad, err)
			}
			if s := good.String(); !strings.HasPrefix(s, string(a)+"(") {
				t.Fatalf("String() = %q", s)
			}
		})
	}
	unknown := redstream.Spec{Algorithm: "no-such-algorithm", Window: time.Second, Limit: 10}
	if _, err := core.Lookup(string(unknown.Algorithm)); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Fatalf("Lookup of an unknown algorithm: %v", err)
	}
	if _, err := unknown.Core(); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Fatalf("Core of an unknown algorithm: %v", err)
	}
	if s := unknown.String(); !strings.Contains(s, "capacity=") || !strings.Contains(s, "window=") {
		t.Fatalf("String of an unknown algorithm shows one shape: %q", s)
	}
}
