package yamlx_test

import (
	"strings"
	"testing"

	"github.com/redstream-go/redstream/internal/yamlx"
)

func TestParseProperties(t *testing.T) {
	doc := "# comment\n! also a comment\n" +
		"a.b=1\n" +
		"a.c : two words  \n" +
		"a.d three\n" +
		"  a.e=\\\n    continued\\\n    again\n" +
		"a.f=tab\\tand\\u0041\\\\\n" +
		"a\\=g=escaped key\n" +
		"a.list[0]=x\na.list[1]=y\n" +
		"a.empty=\n" +
		"a.keyonly\n" +
		"a.colon=http://h:1/x\n" +
		"#---\n" +
		"b=second document\n"
	docs, err := yamlx.ParseProperties([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d documents, want 2", len(docs))
	}
	for key, want := range map[string]string{
		"a.b": "1", "a.c": "two words  ", "a.d": "three", "a.e": "continuedagain", "a.f": "tab\tandA\\",
		"a.empty": "", "a.keyonly": "", "a.colon": "http://h:1/x",
	} {
		n, _, err := docs[0].Lookup(key)
		if err != nil || !n.Exists() {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if n.Value.Value != want {
			t.Errorf("%s = %q, want %q", key, n.Value.Value, want)
		}
	}
	if n, _, _ := docs[0].Get("a=g"); n.Value == nil || n.Value.Value != "escaped key" {
		t.Errorf("escaped key: %+v", n)
	}
	if l, _, _ := docs[0].Lookup("a.list"); l.Line() != 11 {
		t.Errorf("a.list at line %d, want 11", l.Line())
	}
	if b, _, _ := docs[1].Get("b"); b.Value == nil || b.Value.Value != "second document" || b.Line() != 17 {
		t.Errorf("second document: %+v", b)
	}
	if docs, err := yamlx.ParseProperties([]byte("\xef\xbb\xbfa.b=1\n")); err != nil {
		t.Errorf("byte order mark: %v", err)
	} else if n, _, _ := docs[0].Lookup("a.b"); n.Value == nil || n.Value.Value != "1" {
		t.Errorf("byte order mark: a.b not read")
	}
	for _, tc := range []struct{ doc, want string }{
		{"a=1\na=2\n", "config: a (line 2): is set twice (also at line 1)"},
		{"a.b=1\na.b.c=2\n", "config: a.b (line 2): is also set at line 1 as a value, not a mapping"},
		{"x=\\u12\n", "config: x (line 1): malformed \\u escape"},
		{"a[b=1\n", "config: a[b (line 1): has a '[' without its ']'"},
		{"a..b=1\n", "config: a..b (line 1): has an empty part"},
		{"=1\n", "config: (document) (line 1): a property needs a key"},
		{"ok=1\nbad=\xff\n", "config: (document) (line 2): is not valid UTF-8"},
	} {
		if _, err := yamlx.ParseProperties([]byte(tc.doc)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error = %v, want %s", tc.doc, err, tc.want)
		}
	}
}

func TestSplitKeys(t *testing.T) {
	root := mustParse(t, "a.b.c: 1\n\"[x.y]\": 2\nl[0]: 3\nm[k.j].n: 4\n")
	for path, want := range map[string]string{"a.b.c": "1", "[x.y]": "2", "l.0": "3"} {
		segs := strings.Split(path, ".")
		if path == "[x.y]" {
			segs = []string{"x.y"}
		}
		cur := root
		for _, s := range segs {
			cur, _, _ = cur.Get(s)
		}
		if cur.Value == nil || cur.Value.Value != want {
			t.Errorf("%s = %+v, want %s", path, cur.Value, want)
		}
	}
	m, _, _ := root.Get("m")
	kj, _, _ := m.Get("k.j")
	if n, _, _ := kj.Get("n"); n.Value == nil || n.Value.Value != "4" {
		t.Errorf("m[k.j].n not read")
	}
	for _, k := range []string{"a[b", "a]b", "a..b", ".a", "a.", "a[b]c", "[a]."} {
		if _, err := yamlx.Parse([]byte("\"" + k + "\": 1\n")); err == nil {
			t.Errorf("key %q was accepted", k)
		}
	}
}
