package httpidem_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/httpidem"
	"github.com/redstream-go/redstream/idempotency"
	"github.com/redstream-go/redstream/internal/yamlx"
)

// section is the YAML section of idempotency keys: the Idempotent's options, and the
// middleware's under http.
type section struct {
	idempotency.Options
	HTTP httpidem.Options `yaml:"http"`
}

// TestYAMLSection: both Options bind from YAML through their tags (durations in
// milliseconds, or as duration strings), and the bound options build working values.
func TestYAMLSection(t *testing.T) {
	root, err := yamlx.Parse([]byte(`redis-idempotency:
  name: payments
  key-prefix: shop:idem
  retention-ms: 86400000
  lease-ms: 10s
  wait: true
  max-result-bytes: 65536
  timeout-ms: 250
  fail-open: false
  http:
    required: true
    methods: [POST, PATCH, DELETE]
    fingerprint-headers: Content-Type, X-Account
    max-body-bytes: 262144
    problem-type: https://api.example.com/docs/idempotency
`))
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := root.Get("redis-idempotency")
	if err != nil {
		t.Fatal(err)
	}
	var s section
	if err := yamlx.Bind(n, &s, yamlx.BindOptions{}); err != nil {
		t.Fatal(err)
	}
	o, h := s.Options, s.HTTP
	if o.Name != "payments" || o.KeyPrefix != "shop:idem" || o.Retention != 24*time.Hour || o.Lease != 10*time.Second ||
		!o.Wait || o.MaxResult != 65536 || o.Timeout != 250*time.Millisecond || o.FailOpen {
		t.Errorf("idempotency.Options %+v", o)
	}
	if !h.Required || strings.Join(h.Methods, ",") != "POST,PATCH,DELETE" || strings.Join(h.FingerprintHeaders, ",") != "Content-Type,X-Account" ||
		h.MaxBody != 262144 || h.ProblemType != "https://api.example.com/docs/idempotency" {
		t.Errorf("httpidem.Options %+v", h)
	}
	idem, err := idempotency.NewMemory(o)
	if err != nil {
		t.Fatal(err)
	}
	h.Idempotent, h.Principal = idem, func(*http.Request) string { return "" }
	if _, err := httpidem.New(h); err != nil {
		t.Fatal(err)
	}

	// A bad value is an error naming the key; an invalid setting fails in New.
	root, _ = yamlx.Parse([]byte("redis-idempotency:\n  lease-ms: soon\n"))
	n, _, _ = root.Get("redis-idempotency")
	if err := yamlx.Bind(n, &section{}, yamlx.BindOptions{}); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Errorf("bad duration: %v", err)
	}
	if _, err := idempotency.NewMemory(idempotency.Options{Lease: 2 * time.Hour, Retention: time.Hour}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("lease over retention: %v", err)
	}
}
