package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// TestEveryAlgorithm ranges over core's registry: the memory engine decides every
// algorithm (it steps core.Limit itself, with no table of its own but the optional
// lock-free bucket path), single and multi-limit, and refuses an algorithm the registry
// does not hold with ErrInvalidConfig.
func TestEveryAlgorithm(t *testing.T) {
	ctx := context.Background()
	for _, a := range core.Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			spec := redstream.Spec{Algorithm: redstream.Algorithm(a.Name), Window: time.Second, Limit: 3}
			if a.Shape == core.Bucket {
				spec = redstream.TokenBucket(3, 1)
				spec.Algorithm = redstream.Algorithm(a.Name)
			}
			for _, specs := range [][]redstream.Spec{{spec}, {spec, redstream.FixedWindow(time.Minute, 10)}} {
				l, err := NewMultiLimiter(specs, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 4; i++ {
					d, err := l.AllowN(ctx, "k", t0, 1)
					if err != nil || d.Allowed != (i < 3) {
						t.Fatalf("%d limits, request %d: %+v, %v", len(specs), i, d, err)
					}
				}
			}
			l, err := NewLimiter(spec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if fast := l.buckets != nil; fast != (a.Lua == "gcra") {
				t.Errorf("lock-free bucket path %t for the row %+v", fast, a)
			}
		})
	}
	_, err := NewLimiter(redstream.Spec{Algorithm: "no-such-algorithm", Window: time.Second, Limit: 1}, Options{})
	if !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Fatalf("unknown algorithm: %v, want ErrInvalidConfig", err)
	}
}
