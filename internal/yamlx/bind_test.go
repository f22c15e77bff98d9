package yamlx_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/yamlx"
)

type level string

type inner struct {
	Ratio float64       `yaml:"ratio" default:"0.5"`
	Wait  time.Duration `yaml:"wait-ms" unit:"ms"`
}

type embedded struct {
	Shared string `yaml:"shared"`
}

type sample struct {
	embedded
	Name     string        `yaml:"name" default:"dflt"`
	Level    level         `yaml:"level"`
	Count    int8          `yaml:"count"`
	Big      uint16        `yaml:"big"`
	On       *bool         `yaml:"on"`
	TTL      time.Duration `yaml:"ttl-seconds" unit:"s"`
	Plain    time.Duration `yaml:"plain"`
	Nodes    []string      `yaml:"nodes"`
	Inner    inner         `yaml:"inner"`
	Raw      yamlx.Node    `yaml:"raw"`
	Untagged int
	Skipped  func() `yaml:"-"`
	hidden   int    //nolint:unused // unexported fields are not bound
}

func bind(t *testing.T, doc string, o yamlx.BindOptions) (sample, error) {
	t.Helper()
	root := mustParse(t, doc)
	sec, _, err := root.Get("s")
	if err != nil {
		t.Fatal(err)
	}
	sec.Path = "s"
	var s sample
	return s, yamlx.Bind(sec, &s, o)
}

func TestBind(t *testing.T) {
	s, err := bind(t, `s:
  shared: emb
  level: high
  count: -128
  big: 65535
  on: "yes"
  ttlSeconds: 90
  plain: 250
  nodes: a:1, b:2
  inner.ratio: 0.25
  inner:
    wait_ms: 1s
  raw: [1, 2]
  untagged: 7
`, yamlx.BindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Shared != "emb" || s.Name != "dflt" || s.Level != "high" || s.Count != -128 || s.Big != 65535 || s.On == nil || !*s.On ||
		s.TTL != 90*time.Second || s.Plain != 250*time.Millisecond || strings.Join(s.Nodes, "|") != "a:1|b:2" ||
		s.Inner.Ratio != 0.25 || s.Inner.Wait != time.Second || s.Raw.Value == nil || s.Untagged != 7 {
		t.Errorf("bound %+v", s)
	}
	s, err = bind(t, "s:\n  nodes: [x, y]\n", yamlx.BindOptions{})
	if err != nil || s.On != nil || s.Inner.Ratio != 0.5 || strings.Join(s.Nodes, "|") != "x|y" {
		t.Errorf("defaults and absent pointer: %+v, %v", s, err)
	}
}

func TestBindErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"s:\n  count: 128\n", "config: s.count (line 2): is out of range for a 8-bit integer: 128"},
		{"s:\n  big: -1\n", "config: s.big (line 2): is out of range for an unsigned 16-bit integer: -1"},
		{"s:\n  on: maybe\n", `config: s.on (line 2): must be true or false, got "maybe"`},
		{"s:\n  ttl-seconds: 1e3\n", `config: s.ttl-seconds (line 2): must be a duration such as 500ms, 2s or a whole number of s, got "1e3"`},
		{"s:\n  ttl-seconds: 9223372037\n", "config: s.ttl-seconds (line 2): is out of range: 9223372037s"},
		{"s:\n  inner: 3\n", `config: s.inner (line 2): must be a mapping, got "3"`},
		{"s:\n  name: [a]\n", "config: s.name (line 2): must be a string, got a list"},
		{"s:\n  nmae: x\n", "config: s.nmae (line 2): unknown key (did you mean name?)"},
		{"s:\n  zzz: x\n", "config: s.zzz (line 2): unknown key (known keys: big, count, inner, level, name, nodes, on, plain, raw, shared, ttl-seconds, untagged)"},
		{"s:\n  name: a\n  Name: b\n", `config: s.name (line 3): is set twice ("Name" here and "name" at line 2)`},
		{"s:\n  nodes: {a: x}\n", "config: s.nodes.a (line 2): must be a list index in [0, 1)"},
		{"s:\n  nodes[1]: x\n", "config: s.nodes.1 (line 2): must be a list index in [0, 1)"},
		{"s:\n  inner.ratio: NaN\n", `config: s.inner.ratio (line 2): must be a finite number, got "NaN"`},
	} {
		if _, err := bind(t, tc.doc, yamlx.BindOptions{}); err == nil || err.Error() != tc.want {
			t.Errorf("%q: error = %v\nwant %s", tc.doc, err, tc.want)
		}
	}
	var warnings []string
	s, err := bind(t, "s:\n  nmae: x\n  count: 3\n", yamlx.BindOptions{Lenient: true, Warn: func(n yamlx.Node, msg string) {
		warnings = append(warnings, n.Path+": "+msg)
	}})
	if err != nil || s.Count != 3 || len(warnings) != 1 || warnings[0] != "s.nmae: unknown key (did you mean name?); ignored" {
		t.Errorf("lenient: %+v, %v, %q", s, err, warnings)
	}
	if err := yamlx.Bind(yamlx.Node{}, sample{}, yamlx.BindOptions{}); err == nil {
		t.Error("Bind accepted a non-pointer")
	}
	var bad struct {
		M map[string][]string `yaml:"m"`
	}
	if err := yamlx.Bind(yamlx.Node{}, &bad, yamlx.BindOptions{}); err == nil || !strings.Contains(err.Error(), "does not support") {
		t.Errorf("unsupported tagged field: %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in, unit string
		want     time.Duration
	}{
		{"250", "", 250 * time.Millisecond}, {"3", "s", 3 * time.Second}, {"1_000", "ms", time.Second},
		{"500ms", "s", 500 * time.Millisecond}, {"2s", "ms", 2 * time.Second}, {"1h30m", "", 90 * time.Minute},
		{"3d", "", 72 * time.Hour}, {"PT2S", "", 2 * time.Second}, {"P1DT2H", "", 26 * time.Hour},
		{"pt0.5s", "", 500 * time.Millisecond}, {"-PT1M", "", -time.Minute}, {"-5", "ms", -5 * time.Millisecond},
		{"2", "d", 48 * time.Hour}, {"7", "us", 7 * time.Microsecond},
	} {
		got, err := yamlx.ParseDuration(tc.in, tc.unit)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q, %q) = %v, %v; want %v", tc.in, tc.unit, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "soon", "PT", "P1H", "PTxS", "9223372036855", "106752d", "PT9999999999999S", "1.5"} {
		if d, err := yamlx.ParseDuration(in, "ms"); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
	if _, err := yamlx.ParseDuration("1", "fortnight"); err == nil {
		t.Error("an unknown unit was accepted")
	}
}

func TestSettings(t *testing.T) {
	on := true
	got := yamlx.Settings(&sample{Name: "n", On: &on, TTL: time.Minute, Nodes: []string{"a", "b"}, Inner: inner{Wait: time.Second}})
	var lines []string
	for _, s := range got {
		lines = append(lines, s.Key+"="+s.Value)
	}
	want := `shared=""|name="n"|level=""|count=0|big=0|on=true|ttl-seconds=60|plain=0|nodes=[a, b]|inner.ratio=0|inner.wait-ms=1000|untagged=0`
	if strings.Join(lines, "|") != want {
		t.Errorf("Settings =\n%s\nwant\n%s", strings.Join(lines, "|"), want)
	}
}

type withMap struct {
	Counts map[string]int `yaml:"counts"`
	Other  string         `yaml:"other"`
}

// TestBindMap: a map keyed by user names binds each entry as its element type, keeps the
// names as written, reports a bad entry at its own path and line, and refuses a non-mapping.
func TestBindMap(t *testing.T) {
	root := mustParse(t, "s:\n  counts:\n    orders: 4\n    audit_log: 1\n  other: x\n")
	sec, _, _ := root.Get("s")
	sec.Path = "s"
	var v withMap
	if err := yamlx.Bind(sec, &v, yamlx.BindOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(v.Counts) != 2 || v.Counts["orders"] != 4 || v.Counts["audit_log"] != 1 || v.Other != "x" {
		t.Fatalf("bound %+v", v)
	}
	settings := yamlx.Settings(&v)
	if len(settings) != 3 || settings[0].Key != "counts.audit_log" || settings[1].Key != "counts.orders" || settings[1].Value != "4" {
		t.Errorf("Settings = %+v, want one setting per entry, sorted", settings)
	}
	for doc, want := range map[string]string{
		"s:\n  counts:\n    orders: four\n": "s.counts.orders (line 3)",
		"s:\n  counts: 4\n":                 "s.counts (line 2): must be a mapping",
		"s:\n  counts:\n    - a\n":          "s.counts (line 2): must be a mapping",
	} {
		root := mustParse(t, doc)
		sec, _, _ := root.Get("s")
		sec.Path = "s"
		var v withMap
		err := yamlx.Bind(sec, &v, yamlx.BindOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to contain %q", doc, err, want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		unit string
		want string
	}{
		{2 * time.Second, "ms", "2000"},
		{2 * time.Second, "", "2000"},
		{time.Hour, "s", "3600"},
		{0, "ms", "0"},
		{1500 * time.Microsecond, "ms", "1.5ms"},
		{90 * time.Second, "m", "1m30s"},
		{time.Second, "furlongs", "1s"},
	} {
		if got := yamlx.FormatDuration(tc.d, tc.unit); got != tc.want {
			t.Errorf("FormatDuration(%v, %q) = %q, want %q", tc.d, tc.unit, got, tc.want)
		}
		if d, err := yamlx.ParseDuration(yamlx.FormatDuration(tc.d, tc.unit), tc.unit); tc.unit != "furlongs" && (err != nil || d != tc.d) {
			t.Errorf("ParseDuration(FormatDuration(%v, %q)) = %v, %v", tc.d, tc.unit, d, err)
		}
	}
}
