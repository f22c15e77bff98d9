package config

import (
	"errors"
	"testing"

	"github.com/redstream-go/redstream"
)

func TestParseFailurePolicy(t *testing.T) {
	for in, want := range map[string]redstream.FailurePolicy{
		"fail-closed": redstream.FailClosed, "FAIL_OPEN": redstream.FailOpen, "failOpen": redstream.FailOpen,
		"fallback": redstream.FailFallback, "local-fallback": redstream.FailFallback, "closed": redstream.FailClosed,
	} {
		if got, err := parseFailurePolicy(in); err != nil || got != want {
			t.Errorf("parseFailurePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, p := range []redstream.FailurePolicy{redstream.FailClosed, redstream.FailOpen, redstream.FailFallback} {
		if got, _ := parseFailurePolicy(p.String()); got != p {
			t.Errorf("%v does not round-trip", p)
		}
	}
	if _, err := parseFailurePolicy("maybe"); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("parseFailurePolicy(maybe) = %v", err)
	}
}
