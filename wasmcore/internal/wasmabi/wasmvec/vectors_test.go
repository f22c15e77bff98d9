package wasmvec

import (
	"bytes"
	"math"
	"testing"
)

func TestF64RoundTrip(t *testing.T) {
	for _, f := range []float64{0, 1, 0.25, 1e-12, 2.199023255552e+12, math.NaN(), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64} {
		s := FormatF64(f)
		got, err := ParseF64(s)
		if err != nil || math.Float64bits(got) != math.Float64bits(f) && !(math.IsNaN(f) && math.IsNaN(got)) {
			t.Errorf("ParseF64(FormatF64(%v) = %q) = %v, %v", f, s, got, err)
		}
	}
}

func TestVectorsDeterministic(t *testing.T) {
	a, err := VectorsJSON()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := VectorsJSON()
	if !bytes.Equal(a, b) {
		t.Fatal("two generations differ")
	}
	f := Vectors()
	statuses := map[int32]int{}
	for _, c := range f.Cases {
		statuses[c.Status]++
	}
	for s := int32(0); s <= 6; s++ {
		if statuses[s] == 0 {
			t.Errorf("no vector returns status %d", s)
		}
	}
}
