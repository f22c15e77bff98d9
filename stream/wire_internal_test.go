package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/redstream-go/redstream/internal/streamwire"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

type vecOrder struct {
	OrderID int64  `json:"orderId"`
	Status  string `json:"status"`
}

type wireVector struct {
	Name     string      `json:"name"`
	Produced bool        `json:"produced"`
	Error    string      `json:"error"`
	Entry    [][2]string `json:"entry"`
	Message  *struct {
		Key        string            `json:"key"`
		Tag        string            `json:"tag"`
		Source     string            `json:"source"`
		SendTimeMs int64             `json:"sendTimeMs"`
		Body       json.RawMessage   `json:"body"`
		Headers    map[string]string `json:"headers"`
	} `json:"message"`
}

func loadVectors(t *testing.T) []wireVector {
	t.Helper()
	b, err := os.ReadFile("testdata/wire_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Vectors []wireVector }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 5 {
		t.Fatalf("only %d vectors", len(f.Vectors))
	}
	return f.Vectors
}

func TestWireVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			e := entry{id: "1-0"}
			for _, f := range v.Entry {
				e.fields = append(e.fields, f[0], f[1])
			}
			var m Message[vecOrder]
			_, err := decodeInto(&m, e)
			if v.Error != "" {
				if !errors.Is(err, ErrUndecodable) {
					t.Fatalf("decode = %v, want ErrUndecodable", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			want := v.Message
			var wantBody vecOrder
			if err := json.Unmarshal(want.Body, &wantBody); err != nil {
				t.Fatal(err)
			}
			if m.Key != want.Key || m.Tag != want.Tag || m.Source != want.Source || m.SendTime.UnixMilli() != want.SendTimeMs || m.Body != wantBody || !reflect.DeepEqual(m.Headers, want.Headers) {
				t.Errorf("decoded %+v, want %+v (body %s)", m, *want, want.Body)
			}
			if !v.Produced {
				return
			}
			fields, err := encodeEntry(want.Key, want.Tag, want.Source, time.UnixMilli(want.SendTimeMs), wantBody, reflect.TypeFor[vecOrder](), false, want.Headers)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fields, e.fields) {
				t.Errorf("produced entry\n got %q\nwant %q", fields, e.fields)
			}
		})
	}
}

func TestGzipRoundTrip(t *testing.T) {
	for _, size := range []int{0, 10, 100_000} {
		js := []byte(`{"status":"` + strings.Repeat("a", size) + `"}`)
		enc, body, err := streamwire.EncodeBody(js, true)
		if err != nil || enc != encGzip {
			t.Fatalf("streamwire.EncodeBody = %q, %v", enc, err)
		}
		if size == 100_000 && len(body) > 2000 {
			t.Errorf("gzip of %d repeated bytes is %d bytes of base64", size, len(body))
		}
		got, err := decodeBody(enc, body)
		if err != nil || !bytes.Equal(got, js) {
			t.Fatalf("decodeBody: %v", err)
		}
	}
	// A compressed bomb beyond maxBodyBytes is poison, not an out-of-memory.
	defer func(n int) { maxBodyBytes = n }(maxBodyBytes)
	maxBodyBytes = 1 << 10
	big := bytes.Repeat([]byte{' '}, maxBodyBytes+10)
	_, body, _ := streamwire.EncodeBody(big, true)
	if _, err := decodeBody(encGzip, body); !errors.Is(err, ErrUndecodable) {
		t.Errorf("oversized body: %v, want ErrUndecodable", err)
	}
}

func TestEnvelopeSplice(t *testing.T) {
	type ownKey struct {
		Key string `json:"key"`
		N   int    `json:"n"`
	}
	type embedded struct {
		ownKey
		Source string
	}
	for _, tc := range []struct {
		name string
		body any
		typ  reflect.Type
		want string
	}{
		{"object", vecOrder{1, "x"}, reflect.TypeFor[vecOrder](), `{"key":"K","tag":"T","source":"S","orderId":1,"status":"x"}`},
		{"empty object", struct{}{}, reflect.TypeFor[struct{}](), `{"key":"K","tag":"T","source":"S"}`},
		{"body owns key", ownKey{"mine", 2}, reflect.TypeFor[ownKey](), `{"tag":"T","source":"S","key":"mine","n":2}`},
		{"embedded owns key and source", embedded{ownKey{"mine", 3}, "src"}, reflect.TypeFor[embedded](), `{"tag":"T","key":"mine","n":3,"Source":"src"}`},
		{"not an object", []int{1, 2}, reflect.TypeFor[[]int](), `[1,2]`},
		{"string", "hi", reflect.TypeFor[string](), `"hi"`},
		{"map", map[string]int{"a": 1}, reflect.TypeFor[map[string]int](), `{"key":"K","tag":"T","source":"S","a":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := encodeEntry("K", "T", "S", time.UnixMilli(5), tc.body, tc.typ, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if f[7] != tc.want {
				t.Errorf("body = %s, want %s", f[7], tc.want)
			}
			if !json.Valid([]byte(f[7])) {
				t.Errorf("body %s is not valid JSON", f[7])
			}
		})
	}
	if _, err := encodeEntry("K", "", "", time.Now(), func() {}, nil, false, nil); err == nil {
		t.Error("encoding a func: got nil error")
	}
}

func TestNextKeyOrder(t *testing.T) {
	const n = 20000
	seen := make(map[int64]bool, n)
	prev := int64(0)
	for i := 0; i < n; i++ {
		k := nextKey()
		if k <= prev || seen[k] {
			t.Fatalf("key %d after %d: not increasing or repeated", k, prev)
		}
		seen[k] = true
		prev = k
	}
	ms := prev>>22 + keyEpoch
	if d := time.Since(time.UnixMilli(ms)); d < -time.Second || d > time.Minute {
		t.Errorf("key time %v is not now", time.UnixMilli(ms))
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		stream, dlq, tag string
	}{
		{"orders", "{orders}:dlq", "orders"},
		{"orders_dev", "{orders_dev}:dlq", "orders_dev"},
		{"{shop}orders", "{shop}orders:dlq", "shop"},
		{"a{b", "{a{b}:dlq", "a{b"},
		{"x{}y", "", ""},
	} {
		if err := checkName("topic", tc.stream); err != nil {
			if tc.dlq != "" {
				t.Errorf("checkName(%q) = %v", tc.stream, err)
			}
			continue
		}
		if tc.dlq == "" {
			t.Errorf("checkName(%q) accepted a name that cannot share a slot", tc.stream)
			continue
		}
		got := streamwire.DeadLetterStreamName(tc.stream)
		tag, _ := hashTag(got)
		if got != tc.dlq || tag != tc.tag {
			t.Errorf("streamwire.DeadLetterStreamName(%q) = %q (tag %q), want %q (tag %q)", tc.stream, got, tag, tc.dlq, tc.tag)
		}
	}
}

func TestFieldOrder(t *testing.T) {
	f, _ := encodeEntry("k", "", "", time.UnixMilli(1), 1, reflect.TypeFor[int](), false, nil)
	var names []string
	for i := 0; i < len(f); i += 2 {
		names = append(names, f[i])
	}
	if got := strings.Join(names, ","); got != "key,tag,enc,body,ts" {
		t.Errorf("fields %s, want key,tag,enc,body,ts", got)
	}
}
