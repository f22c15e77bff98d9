package cache

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

func TestShareable(t *testing.T) {
	type flat struct {
		A int
		B string
		C [3]float64
		D struct{ E bool }
	}
	type withSlice struct {
		A int
		B []int
	}
	for _, tc := range []struct {
		typ  reflect.Type
		want bool
	}{
		{reflect.TypeFor[int](), true},
		{reflect.TypeFor[string](), true},
		{reflect.TypeFor[flat](), true},
		{reflect.TypeFor[user](), true},
		{reflect.TypeFor[withSlice](), false},
		{reflect.TypeFor[[]byte](), false},
		{reflect.TypeFor[*user](), false},
		{reflect.TypeFor[map[string]int](), false},
		{reflect.TypeFor[any](), false},
		{reflect.TypeFor[[2]*int](), false},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			if got := shareable(tc.typ); got != tc.want {
				t.Errorf("shareable(%v) = %v, want %v", tc.typ, got, tc.want)
			}
		})
	}
}

// A caller mutating what a hot hit returned must not change what the next caller gets,
// memo or not.
func TestHotHitsAreIndependentCopies(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	c := newCache(t, redistest.Client(t), cfg)
	if err := c.Set(ctx, "s", []int{1, 2, 3}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "u", user{ID: 1, Name: "a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		s, err := Get[[]int](ctx, c, "s")
		if err != nil || !reflect.DeepEqual(s, []int{1, 2, 3}) {
			t.Fatalf("Get = %v, %v", s, err)
		}
		s[0] = 99
		u, err := Get[user](ctx, c, "u")
		if err != nil || u != (user{ID: 1, Name: "a"}) {
			t.Fatalf("Get = %+v, %v", u, err)
		}
		u.ID = 99
	}
	if c.Stats().LocalHits == 0 {
		t.Error("no hit was served from memory: the test did not exercise the memo")
	}
	// Another type for the same key decodes afresh.
	if _, err := Get[string](ctx, c, "u"); err == nil {
		t.Error("Get[string] of a struct succeeded")
	}
}
