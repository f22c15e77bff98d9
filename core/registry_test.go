package core

import (
	"errors"
	"testing"
)

// validParams returns parameters of a's shape that every algorithm of that shape accepts.
func validParams(t *testing.T, a Algorithm) Params {
	t.Helper()
	switch a.Shape {
	case Bucket:
		return Params{Capacity: 10, Rate: 5}
	case Window:
		return Params{Window: Second, Limit: 10}
	}
	t.Fatalf("algorithm %q: unknown shape %d", a.Name, a.Shape)
	return Params{}
}

// TestRegistry ranges over the registry: every row is complete and unique, New builds its
// limit (whose Name is the row's), the Ints have the shape's length, a new key is idle and
// admits a request, and the state stays within the row's Words.
func TestRegistry(t *testing.T) {
	names, codes := map[string]bool{}, map[string]bool{}
	for _, a := range Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			if a.Name == "" || len(a.Code) != 2 || a.Lua == "" || a.Words < 0 || a.Words > 3 {
				t.Fatalf("incomplete row %+v", a)
			}
			if names[a.Name] || codes[a.Code] {
				t.Fatalf("name %q or code %q registered twice", a.Name, a.Code)
			}
			names[a.Name], codes[a.Code] = true, true
			if got, err := Lookup(a.Name); err != nil || got.Name != a.Name {
				t.Fatalf("Lookup(%q) = %+v, %v", a.Name, got, err)
			}
			l, err := a.New(validParams(t, a))
			if err != nil {
				t.Fatal(err)
			}
			if l.Name() != a.Name {
				t.Fatalf("Name() = %q, want %q", l.Name(), a.Name)
			}
			wantInts := map[Shape]int{Bucket: 3, Window: 2}[a.Shape]
			if got := len(l.ints()); got != wantInts {
				t.Fatalf("%d Ints, want %d for its shape", got, wantInts)
			}
			var s State
			if !l.IdleState(&s, base) {
				t.Fatal("a new key is not idle")
			}
			var d Decision
			for i := 0; i < 3; i++ {
				if err := l.StepState(&s, base, 1, &d); err != nil || !d.Allowed {
					t.Fatalf("step %d of a new key: %+v, %v", i, d, err)
				}
			}
			for i := a.Words; i < 3; i++ {
				if s.Words[i] != 0 {
					t.Fatalf("state word %d = %d, beyond the row's %d words", i, s.Words[i], a.Words)
				}
			}
			if (a.Words == 0) != (s.Log != nil) {
				t.Fatalf("Words %d, but the state's log is %v", a.Words, s.Log)
			}
			if l.IdleState(&s, base) {
				t.Fatal("a key that just admitted is idle")
			}
		})
	}
}

func TestLookupUnknown(t *testing.T) {
	if _, err := Lookup("no-such-algorithm"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Lookup of an unknown algorithm: %v, want ErrInvalidConfig", err)
	}
	if _, err := (Algorithm{Name: "no-such-algorithm"}).New(Params{Window: Second, Limit: 1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New of an unregistered algorithm: %v, want ErrInvalidConfig", err)
	}
}
