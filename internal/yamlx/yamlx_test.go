package yamlx_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redstream-go/redstream/internal/yamlx"
)

func mustParse(t *testing.T, doc string) yamlx.Node {
	t.Helper()
	n, err := yamlx.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return n
}

func TestNormalize(t *testing.T) {
	for _, k := range []string{"window-ms", "windowMs", "window_ms", "WINDOWMS", "Window-Ms"} {
		if got := yamlx.Normalize(k); got != "windowms" {
			t.Errorf("Normalize(%q) = %q, want windowms", k, got)
		}
	}
	if yamlx.Equal("rate-per-second", "ratePerSecond") != true || yamlx.Equal("limit", "limits") {
		t.Errorf("Equal is wrong")
	}
}

func TestLookupForms(t *testing.T) {
	docs := map[string]string{
		"nested kebab": "redis-streaming:\n  ratelimit:\n    window-ms: 250\n",
		"nested camel": "redisStreaming:\n  ratelimit:\n    windowMs: 250\n",
		"snake":        "redis_streaming:\n  ratelimit:\n    window_ms: 250\n",
		"dotted":       "redis-streaming.ratelimit.window-ms: 250\n",
		"half dotted":  "redis-streaming.ratelimit:\n  windowMs: 250\n",
		"null parent":  "redis-streaming:\nredis-streaming.ratelimit.window-ms: 250\n",
		"merge key":    "base: &b\n  window-ms: 250\nredis-streaming:\n  ratelimit:\n    <<: *b\n",
		"alias":        "x: &v 250\nredis-streaming:\n  ratelimit:\n    window-ms: *v\n",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			n, ok, err := mustParse(t, doc).Lookup("redis-streaming.ratelimit.window-ms")
			if err != nil || !ok {
				t.Fatalf("Lookup = %v, %v", ok, err)
			}
			v, err := n.Int64()
			if v != 250 || err != nil || n.Path != "redis-streaming.ratelimit.window-ms" {
				t.Errorf("value %d, %v, path %q", v, err, n.Path)
			}
		})
	}
}

func TestBracketKeysAndEntries(t *testing.T) {
	root := mustParse(t, "policies:\n  \"[api.v1]\":\n    limit: 5\n  api2.limit: 7\n  api3:\n    limit: 9\n")
	p, ok, err := root.Get("policies")
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	es, err := p.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "api.v1,api2,api3" {
		t.Errorf("entries = %v, want api.v1,api2,api3 in document order", names)
	}
	l, _, _ := es[1].Get("limit")
	if v, _ := l.Int64(); v != 7 || l.Path != "policies.api2.limit" || l.Line() != 4 {
		t.Errorf("api2.limit = %d at %q line %d", v, l.Path, l.Line())
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, doc, path string
		get             func(yamlx.Node) error
		want            string
	}{
		{"relaxed duplicate", "a:\n  window-ms: 1\n  windowMs: 2\n", "a", func(n yamlx.Node) error {
			_, _, err := n.Get("window-ms")
			return err
		}, `config: a.window-ms (line 3): is set twice ("windowMs" here and "window-ms" at line 2)`},
		{"dotted duplicate", "a.b: 1\na:\n  b: 2\n", "", nil, "config: a.b (line 3): is set twice (also at line 1)"},
		{"not an integer", "a:\n  limit: ten\n", "a", func(n yamlx.Node) error {
			l, _, _ := n.Get("limit")
			_, err := l.Int64()
			return err
		}, `config: a.limit (line 2): must be an integer, got "ten"`},
		{"integer out of range", "a:\n  limit: 99999999999999999999\n", "a", func(n yamlx.Node) error {
			l, _, _ := n.Get("limit")
			_, err := l.Int64()
			return err
		}, `config: a.limit (line 2): is out of range: 99999999999999999999`},
		{"not a number", "a:\n  rate: .nan\n", "a", func(n yamlx.Node) error {
			l, _, _ := n.Get("rate")
			_, err := l.Float64()
			return err
		}, `config: a.rate (line 2): must be a finite number, got ".nan"`},
		{"not a bool", "a:\n  enabled: maybe\n", "a", func(n yamlx.Node) error {
			l, _, _ := n.Get("enabled")
			_, err := l.Bool()
			return err
		}, `config: a.enabled (line 2): must be true or false, got "maybe"`},
		{"mapping expected", "a: 5\n", "", func(n yamlx.Node) error {
			a, _, _ := n.Get("a")
			_, _, err := a.Get("b")
			return err
		}, `config: a (line 1): must be a mapping, got "5"`},
		{"list is not a scalar", "a:\n  limit: [1, 2]\n", "a", func(n yamlx.Node) error {
			l, _, _ := n.Get("limit")
			_, err := l.Int64()
			return err
		}, `config: a.limit (line 2): must be an integer, got a list`},
		{"root not a mapping", "- 1\n- 2\n", "", nil, "config: (document) (line 1): must be a mapping of settings"},
		{"syntax", "a: [\n", "", nil, "config: yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := yamlx.Parse([]byte(tt.doc))
			if err == nil && tt.get != nil {
				n := root
				if tt.path != "" {
					n, _, _ = root.Lookup(tt.path)
				}
				err = tt.get(n)
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
			var ye *yamlx.Error
			if tt.name != "syntax" && !errors.As(err, &ye) {
				t.Errorf("error %T is not a *yamlx.Error", err)
			}
		})
	}
}

func TestScalars(t *testing.T) {
	root := mustParse(t, "b1: yes\nb2: \"false\"\ni: 1_000\ns: \" x \"\nf: 2.5\nq: \"100\"\nnull1:\nnull2: ~\n")
	get := func(k string) yamlx.Node {
		n, _, err := root.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if v, _ := get("b1").Bool(); !v {
		t.Errorf("b1")
	}
	if v, err := get("b2").Bool(); v || err != nil {
		t.Errorf("b2 = %v, %v", v, err)
	}
	if v, _ := get("i").Int64(); v != 1000 {
		t.Errorf("i = %d", v)
	}
	if v, _ := get("q").Int64(); v != 100 {
		t.Errorf("quoted integers are accepted, as Spring converts strings: %d", v)
	}
	if v, _ := get("f").Float64(); v != 2.5 {
		t.Errorf("f = %v", v)
	}
	if v, _ := get("s").String(); v != "x" {
		t.Errorf("s = %q", v)
	}
	for _, k := range []string{"null1", "null2", "absent"} {
		if _, ok, err := root.Get(k); ok || err != nil {
			t.Errorf("%s: ok %v err %v, want an absent setting", k, ok, err)
		}
	}
	empty := mustParse(t, "")
	if _, ok, err := empty.Lookup("a.b"); ok || err != nil {
		t.Errorf("empty document: %v %v", ok, err)
	}
}

func TestRelaxedMerge(t *testing.T) {
	root := mustParse(t, "redis-streaming.ratelimit.enabled: true\nredisStreaming:\n  ratelimit:\n    windowMs: 5\n")
	for _, k := range []string{"enabled", "window-ms"} {
		if _, ok, err := root.Lookup("redis-streaming.ratelimit." + k); !ok || err != nil {
			t.Errorf("%s: %v %v; want the two spellings merged", k, ok, err)
		}
	}
}
