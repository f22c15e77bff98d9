package config_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/internal/yamlx"
)

// measure runs Load once and returns its error, its duration and the bytes it allocated.
// A Load that does not return within 20 s fails the test instead of hanging it.
func measure(t *testing.T, data []byte, properties bool) (error, time.Duration, uint64) {
	t.Helper()
	type result struct {
		err     error
		elapsed time.Duration
		bytes   uint64
	}
	done := make(chan result, 1)
	go func() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		var err error
		if properties {
			_, err = config.LoadProperties(data, quiet)
		} else {
			_, err = config.Load(data, quiet)
		}
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		done <- result{err, elapsed, after.TotalAlloc - before.TotalAlloc}
	}()
	select {
	case r := <-done:
		return r.err, r.elapsed, r.bytes
	case <-time.After(20 * time.Second):
		t.Fatalf("Load did not return within 20 s")
		return nil, 0, 0
	}
}

func hostileFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/hostile/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// doubling returns keys whose placeholders double the text at every level.
func doubling(levels int) string {
	var b strings.Builder
	b.WriteString("a0: lol\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "a%d: ${a%d}${a%d}\n", i, i-1, i-1)
	}
	return b.String()
}

// mappingBomb is an alias bomb of mappings (each level holds nine of the level below).
func mappingBomb(levels int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 {k0: x, k1: x, k2: x, k3: x, k4: x, k5: x, k6: x, k7: x, k8: x}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {", i, i)
		for j := range 9 {
			fmt.Fprintf(&b, "k%d: *l%d, ", j, i-1)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// TestHostileInputs: every input returns an error (or a result) quickly and in bounded
// memory: a '[' without ']' (once an endless loop), alias bombs (once 1.4 GB and 11 s for
// 368 bytes), merge-key and placeholder bombs, cycles, deep nesting.
func TestHostileInputs(t *testing.T) {
	tests := []struct {
		name       string
		data       []byte
		properties bool
		want       string // a substring of the error
	}{
		{"bracket without end", []byte("a[b: 1\n"), false, "config: a[b (line 1): has a '[' without its ']'"},
		{"bracket typo in a policy", []byte("redis-streaming.ratelimit.policies.[api.v1.limit: 5\n"), false, "has a '[' without its ']'"},
		{"bracket in properties", []byte("a[b=1\n"), true, "config: a[b (line 1): has a '[' without its ']'"},
		{"alias bomb 368 bytes", hostileFile(t, "bomb-368.yaml"), false, "config: e[0] (line 6): alias *d expands past the limit of 9984 nodes"},
		{"alias bomb 414 bytes", hostileFile(t, "bomb-414.yaml"), false, "config: e[0] (line 6): alias *d expands past the limit of 10720 nodes"},
		{"mapping alias bomb", []byte(mappingBomb(9)), false, "expands past the limit of"},
		{"merge key bomb", []byte(strings.ReplaceAll(mappingBomb(9), "{k0: *", "{<<: *")), false, "expands past the limit of"},
		{"placeholder doubling", []byte(doubling(40)), false, "placeholders expand to too much text"},
		{"placeholder cycle", []byte("a: ${b}\nb: x${a}\n"), false, "refers back to itself"},
		{"placeholder self", []byte("a: ${a:1}\n"), false, "refers back to itself"},
		{"placeholder unclosed", []byte("a: ${b\n"), false, `config: a (line 1): placeholder "${b" has no closing '}'`},
		{"deep flow nesting", []byte("a: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n"), false, "config: "},
		{"deep block nesting", []byte(deepBlock(200)), false, "nesting too deep"},
		{"long dotted key", []byte(strings.Repeat("a.", 500) + "b: 1\n"), false, "nesting too deep"},
		{"long dotted property", []byte(strings.Repeat("a.", 50000) + "b=1\n"), true, "nesting too deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, elapsed, bytes := measure(t, tt.data, tt.properties)
			t.Logf("%d bytes of input: %v, %.2f MB allocated: %v", len(tt.data), elapsed, float64(bytes)/(1<<20), err)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			var ye *yamlx.Error
			if !errors.Is(err, redstream.ErrInvalidConfig) || (!errors.As(err, &ye) && !strings.Contains(err.Error(), "yaml:")) {
				t.Errorf("error %#v: want a *yamlx.Error matching ErrInvalidConfig", err)
			}
			// The bound is 100 ms and a few MB; the margin absorbs -race and a loaded machine.
			if elapsed > time.Second {
				t.Errorf("took %v, want well under 1 s", elapsed)
			}
			if limit := uint64(8<<20) + 64*uint64(len(tt.data)); bytes > limit {
				t.Errorf("allocated %d bytes, want at most %d", bytes, limit)
			}
		})
	}
}

func deepBlock(levels int) string {
	var b strings.Builder
	for i := range levels {
		fmt.Fprintf(&b, "%sk:\n", strings.Repeat(" ", i))
	}
	fmt.Fprintf(&b, "%sv: 1\n", strings.Repeat(" ", levels))
	return b.String()
}

// TestBombAllocations pins the allocation count of rejecting the 414-byte bomb (which
// would expand to 9^10 nodes).
func TestBombAllocations(t *testing.T) {
	data := hostileFile(t, "bomb-414.yaml")
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := config.Load(data, quiet); err == nil {
			t.Fatal("the bomb loaded")
		}
	})
	t.Logf("rejecting the 414-byte bomb: %.0f allocations", allocs)
	if allocs > 60000 {
		t.Errorf("%.0f allocations, want at most 60000 (linear in the node budget)", allocs)
	}
}

// TestLargeFileLinear: a large valid file (50 000 entries, each with a merge key) loads;
// the work is linear in its size.
func TestLargeFileLinear(t *testing.T) {
	gen := func(n int) []byte {
		var b strings.Builder
		b.WriteString("common: &c {x: 1, y: 2}\nredis-cache:\n  key-prefix: \"big:\"\napp:\n")
		for i := range n {
			fmt.Fprintf(&b, "  key%d: {<<: *c, v: %d}\n", i, i)
		}
		return []byte(b.String())
	}
	small, large := gen(5000), gen(50000)
	errS, tS, _ := measure(t, small, false)
	errL, tL, bytesL := measure(t, large, false)
	if errS != nil || errL != nil {
		t.Fatalf("Load: %v, %v", errS, errL)
	}
	t.Logf("5k entries: %v; 50k entries (%d bytes): %v, %.1f MB", tS, len(large), tL, float64(bytesL)/(1<<20))
	if tL > 15*time.Second {
		t.Errorf("50k entries took %v", tL)
	}
	// Ten times the input: far less than the hundred times a quadratic reader would need.
	if tS > 20*time.Millisecond && tL > 40*tS {
		t.Errorf("10x the input took %.0fx the time (%v vs %v): not linear", float64(tL)/float64(tS), tL, tS)
	}
}
