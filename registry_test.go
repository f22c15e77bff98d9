package redstream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redstream-go/redstream"
)

func TestRegistry(t *testing.T) {
	a, b := &fakeLimiter{}, &fakeLimiter{}
	src := map[string]redstream.Limiter{"api2": b, "api1": a}
	r, err := redstream.NewRegistry(src)
	if err != nil {
		t.Fatal(err)
	}
	src["api3"] = a // the registry holds a copy
	delete(src, "api1")
	if r.Len() != 2 {
		t.Errorf("Len() = %d, want 2 (changes to the source map must not leak in)", r.Len())
	}
	if got, err := r.Get("api1"); err != nil || got != a {
		t.Errorf("Get(api1) = %v, %v", got, err)
	}
	_, err = r.Get("api3")
	if !errors.Is(err, redstream.ErrNotFound) || !strings.Contains(err.Error(), `"api3"`) {
		t.Errorf("Get(unknown) error = %v, want ErrNotFound naming it", err)
	}
	var names []string
	for n, l := range r.All() {
		names = append(names, n)
		if l == nil {
			t.Errorf("All() yielded a nil limiter for %q", n)
		}
	}
	if strings.Join(names, ",") != "api1,api2" || strings.Join(r.Names(), ",") != "api1,api2" {
		t.Errorf("All() names = %v, Names() = %v; want api1,api2 in order", names, r.Names())
	}
	ns := r.Names()
	ns[0] = "changed"
	if r.Names()[0] != "api1" {
		t.Errorf("Names() returned the registry's storage")
	}
	for range r.All() {
		break // early stop must be honoured
	}
}

func TestRegistryBadInput(t *testing.T) {
	tests := map[string]map[string]redstream.Limiter{
		"empty name":  {"": &fakeLimiter{}},
		"nil limiter": {"x": nil},
	}
	for name, m := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := redstream.NewRegistry(m); !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("NewRegistry error = %v, want ErrInvalidConfig", err)
			}
		})
	}
	empty, err := redstream.NewRegistry(nil)
	if err != nil || empty.Len() != 0 {
		t.Errorf("NewRegistry(nil) = %v, %v; want an empty registry", empty, err)
	}
	var nilReg *redstream.Registry
	if _, err := nilReg.Get("x"); !errors.Is(err, redstream.ErrNotFound) || nilReg.Len() != 0 {
		t.Errorf("nil registry Get = %v", err)
	}
}
