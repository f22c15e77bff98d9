package redstream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/metrics"
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
	if len(r.Names()) != 2 {
		t.Errorf("Names() = %v, want 2 names (changes to the source map must not leak in)", r.Names())
	}
	if got, err := r.Get("api1"); err != nil || got != a {
		t.Errorf("Get(api1) = %v, %v", got, err)
	}
	_, err = r.Get("api3")
	if !errors.Is(err, redstream.ErrNotFound) || !strings.Contains(err.Error(), `"api3"`) {
		t.Errorf("Get(unknown) error = %v, want ErrNotFound naming it", err)
	}
	if strings.Join(r.Names(), ",") != "api1,api2" {
		t.Errorf("Names() = %v; want api1,api2 in order", r.Names())
	}
	ns := r.Names()
	ns[0] = "changed"
	if r.Names()[0] != "api1" {
		t.Errorf("Names() returned the registry's storage")
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
	if err != nil || len(empty.Names()) != 0 {
		t.Errorf("NewRegistry(nil) = %v, %v; want an empty registry", empty, err)
	}
	var nilReg *redstream.Registry
	if _, err := nilReg.Get("x"); !errors.Is(err, redstream.ErrNotFound) || nilReg.Names() != nil {
		t.Errorf("nil registry Get = %v", err)
	}
}

// TestRegistrySharedMetricsName: two limiters counted under one metrics.Named name would mix
// their counters; the registry refuses them, looking through a failure policy around one.
func TestRegistrySharedMetricsName(t *testing.T) {
	a, err := metrics.Named("registry-shared", &fakeLimiter{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := metrics.Named("registry-shared", &fakeLimiter{})
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := redstream.WithFailurePolicy(b, redstream.FailOpen, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = redstream.NewRegistry(map[string]redstream.Limiter{"search": a, "upload": wrapped})
	if !errors.Is(err, redstream.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), `limiters "search" and "upload" are both counted as "registry-shared"`) {
		t.Errorf("NewRegistry with one metrics name twice: %v, want ErrInvalidConfig naming both", err)
	}
	c, err := metrics.Named("registry-other", &fakeLimiter{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redstream.NewRegistry(map[string]redstream.Limiter{"search": a, "upload": c, "plain": &fakeLimiter{}}); err != nil {
		t.Errorf("distinct metrics names: %v", err)
	}
}
