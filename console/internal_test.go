package console

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redstream-go/redstream/internal/streamwire"
)

func TestFoldTopics(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		want string
	}{
		{"topic and its dead letters", []string{"orders", "{orders}:dlq"}, "orders"},
		{"dead letters only", []string{"{orders}:dlq"}, "orders"},
		{"tagged topic", []string{"{shop}orders", "{shop}orders:dlq"}, "{shop}orders"},
		{"topic named like its tag", []string{"{orders}", "{orders}:dlq"}, "{orders}"},
		{"both candidates exist", []string{"orders", "{orders}", "{orders}:dlq"}, "orders {orders}"},
		{"plain name ending in :dlq is a topic", []string{"audit:dlq"}, "audit:dlq"},
		{"dead letters of a :dlq topic", []string{"audit:dlq", "{audit:dlq}:dlq"}, "audit:dlq"},
		{"empty tag", []string{"{}:dlq"}, "{}:dlq"},
		{"bare suffix", []string{":dlq"}, ":dlq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := map[string]bool{}
			for _, k := range tc.keys {
				keys[k] = true
			}
			if got := strings.Join(foldTopics(keys), " "); got != tc.want {
				t.Fatalf("foldTopics(%v) = %q, want %q", tc.keys, got, tc.want)
			}
		})
	}
}

// FuzzFoldTopics: every key is accounted for, as a topic or as the dead-letter stream of one.
func FuzzFoldTopics(f *testing.F) {
	for _, s := range []string{"orders", "{orders}:dlq", "{shop}orders:dlq", "{}:dlq", "a}b:dlq", "{{x}}:dlq", "\xff:dlq"} {
		f.Add(s, "orders")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		keys := map[string]bool{a: true, b: true}
		topics := foldTopics(keys)
		set := map[string]bool{}
		for _, tp := range topics {
			set[tp] = true
		}
		for k := range keys {
			if set[k] {
				continue
			}
			tp, ok := topicOfDeadLetters(k, keys)
			if !ok || !set[tp] || streamwire.DeadLetterStreamName(tp) != k {
				t.Fatalf("key %q: neither a topic nor the dead letters of one (%v)", k, topics)
			}
		}
	})
}

// FuzzCutString: the cut is a prefix of at most n bytes, and valid UTF-8 when the input is.
func FuzzCutString(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("日本語", 4)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<20 {
			return
		}
		got, cut := cutString(s, n)
		if !strings.HasPrefix(s, got) || len(got) > n || len(got)+cut != len(s) {
			t.Fatalf("cutString(%q, %d) = %q, %d", s, n, got, cut)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("cutString(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
	})
}

// FuzzValidID: what validID accepts is an entry id, "ms" or "ms-seq", digits only.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"1-1", "0", "1700000000000-0", "-", "+", "(1-1", "1-", "18446744073709551615-18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !validID(s) {
			return
		}
		ms, seq, _ := strings.Cut(s, "-")
		if ms == "" || strings.Trim(ms+seq, "0123456789") != "" || (strings.Contains(s, "-") && seq == "") {
			t.Fatalf("validID(%q) accepted a non-id", s)
		}
	})
}
