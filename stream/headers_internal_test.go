package stream

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidateHeaders(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= maxHeaders; i++ {
		many[strings.Repeat("x", i+1)] = ""
	}
	tests := []struct {
		name    string
		h       map[string]string
		wantErr string // "" for valid
	}{
		{"nil", nil, ""},
		{"empty", map[string]string{}, ""},
		{"trace context", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "a=b"}, ""},
		{"empty value", map[string]string{"x": ""}, ""},
		{"utf-8 value", map[string]string{"city": "Zürich"}, ""},
		{"empty name", map[string]string{"": "v"}, "empty name"},
		{"space in name", map[string]string{"a b": "v"}, "not printable ASCII"},
		{"newline in name", map[string]string{"a\n": "v"}, "not printable ASCII"},
		{"non-ascii name", map[string]string{"é": "v"}, "not printable ASCII"},
		{"long name", map[string]string{strings.Repeat("n", maxHeaderNameBytes+1): "v"}, "bytes, at most"},
		{"max name", map[string]string{strings.Repeat("n", maxHeaderNameBytes): "v"}, ""},
		{"bad utf-8 value", map[string]string{"x": "\xff"}, "not valid UTF-8"},
		{"too many", many, "headers, at most"},
		{"too large", map[string]string{"a": strings.Repeat("v", maxHeaderBytes)}, "bytes of names and values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validateHeaders(tc.h)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("validateHeaders = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidHeader) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("validateHeaders = %v, want ErrInvalidHeader containing %q", err, tc.wantErr)
			}
			if _, err := encodeEntry("k", "", "", time.UnixMilli(1), 1, reflect.TypeFor[int](), false, tc.h); !errors.Is(err, ErrInvalidHeader) {
				t.Fatalf("encodeEntry = %v, want ErrInvalidHeader", err)
			}
		})
	}
}

func TestHeaderFieldsAfterContract(t *testing.T) {
	h := map[string]string{"b": "2", "a": "1", "c": "3"}
	f, err := encodeEntry("k", "", "", time.UnixMilli(1), 1, reflect.TypeFor[int](), false, h)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < len(f); i += 2 {
		names = append(names, f[i])
	}
	if got := strings.Join(names, ","); got != "key,tag,enc,body,ts,h:a,h:b,h:c" {
		t.Errorf("fields %s, want key,tag,enc,body,ts,h:a,h:b,h:c", got)
	}
	if got := decodeHeaders(f); !maps.Equal(got, h) {
		t.Errorf("decoded headers %v, want %v", got, h)
	}
}

// FuzzDecodeEntry feeds arbitrary entries (as a foreign producer or a corrupted stream may
// hold) to the decoder: it must never panic, must return only headerPrefix fields as
// headers, and valid headers must survive an encode/decode round trip.
func FuzzDecodeEntry(f *testing.F) {
	f.Add("h:traceparent", "00-abc-01", "plain", `{"orderId":1}`, "x", "y")
	f.Add("h:", "", "gzip", "!!", "h:h:", "v")
	f.Add("key", "k", "", `[1,2]`, "ts", "-1")
	f.Fuzz(func(t *testing.T, n1, v1, enc, body, n2, v2 string) {
		e := entry{id: "1-0", fields: []string{fieldEnc, enc, fieldBody, body, n1, v1, n2, v2}}
		var m Message[vecOrder]
		_, err := decodeInto(&m, e)
		if err != nil && !errors.Is(err, ErrUndecodable) {
			t.Fatalf("decode error %v does not wrap ErrUndecodable", err)
		}
		for k, v := range decodeHeaders(e.fields) {
			got, ok := e.get(headerPrefix + k)
			if !ok || k == "" {
				t.Fatalf("header %q not from a %q field", k, headerPrefix)
			}
			if v != got && n1 != n2 { // with a repeated name the last one wins
				t.Fatalf("header %q = %q, field holds %q", k, v, got)
			}
		}
		h := map[string]string{n1: v1, n2: v2}
		if validateHeaders(h) != nil {
			return
		}
		fields, err := encodeEntry("k", "", "", time.UnixMilli(1), 1, reflect.TypeFor[int](), false, h)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeHeaders(fields); !maps.Equal(got, h) {
			t.Fatalf("round trip: %v, want %v", got, h)
		}
	})
}
