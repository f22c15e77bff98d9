package httpidem

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

// FuzzParseKey: the Idempotency-Key parser never panics; a key it accepts is 1 to 255
// printable ASCII characters, and serializing it back as an sf-string parses to the same key.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `"a\"b\\c"`, ` "k";a=1;b;c="x" `,
		`"k";d=?0;e=:AQ==:;f=tok/x;g=@1659578233;h=%"caf%c3%a9";i=-1.5`,
		`token`, `"a", "b"`, `""`, `"abc`, `"a\b"`, `"k";A`, `"k";a=1.2345`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := parseKey(v)
		if err != nil {
			return
		}
		if len(key) == 0 || len(key) > maxKeyLen {
			t.Fatalf("parseKey(%q) = %q: length %d", v, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("parseKey(%q) = %q: byte %#x", v, key, key[i])
			}
		}
		again, err := parseKey(string(appendString(nil, key)))
		if err != nil || again != key {
			t.Fatalf("round trip of %q: %q, %v", key, again, err)
		}
	})
}

// FuzzDecodeStored: the stored-response decoder never panics on any input; what it accepts
// encodes back to the same bytes (the format has one encoding per response) and decodes to
// the same response.
func FuzzDecodeStored(f *testing.F) {
	r := &response{status: 201, header: http.Header{"Location": {"/p/1"}, "X-Multi": {"a", "b"}}, body: []byte(`{"ok":true}`)}
	f.Add(r.encode())
	f.Add((&response{status: 204, header: http.Header{}}).encode())
	f.Add([]byte{storedVersion, 0xc8, 0x01, 0x01, 0x01, 'A', 0x00})
	f.Add([]byte{storedVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		resp, err := decode(p)
		if err != nil {
			return
		}
		if resp.status < 100 || resp.status > 999 {
			t.Fatalf("status %d", resp.status)
		}
		enc := resp.encode()
		if !bytes.Equal(enc, p) {
			t.Fatalf("decode(%x) encodes as %x", p, enc)
		}
		again, err := decode(enc)
		if err != nil || again.status != resp.status || !reflect.DeepEqual(again.header, resp.header) || !bytes.Equal(again.body, resp.body) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, resp)
		}
	})
}

func TestStoredRoundTrip(t *testing.T) {
	for _, r := range []*response{
		{status: 200, header: http.Header{}, body: nil},
		{status: 201, header: http.Header{"Location": {"/p/1"}, "Set-Cookie": {"a=1", "b=2"}, "Empty": {}}, body: []byte("\x00\xff body")},
	} {
		got, err := decode(r.encode())
		if err != nil || got.status != r.status || len(got.header) != len(r.header) || !bytes.Equal(got.body, r.body) {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", r, got, err)
		}
		for k, vs := range r.header {
			if !reflect.DeepEqual(got.header[k], append([]string{}, vs...)) {
				t.Fatalf("header %s: %q, want %q", k, got.header[k], vs)
			}
		}
	}
	for _, p := range [][]byte{nil, {2}, {storedVersion}, {storedVersion, 50}, {storedVersion, 0xc8, 0x01, 0x05}} {
		if _, err := decode(p); err == nil {
			t.Errorf("decode(%x): nil error", p)
		}
	}
}
