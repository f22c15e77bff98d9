package console

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseLookup: any query of the limits page parses without panicking, within bounds:
// an accepted lookup has a key of at most MaxKeyBytes, a cost in 1..maxCost, and its key
// written back into the form (formKey, under its encoding) parses to the same key; the
// display form of the key is valid UTF-8 and bounded.
func FuzzParseLookup(f *testing.F) {
	f.Add("l=api&key=customer%3Aada&n=1")
	f.Add("l=api&key=00ff7b7d&enc=hex")
	f.Add("l=api&key=%00%FF%7B&enc=text&n=3")
	f.Add("key=k")
	f.Add("l=api&key=zz&enc=hex")
	f.Add("l=api&key=k&n=99999999999999999999")
	f.Add("l=api&key=0%20a&enc=hex")
	f.Add("enc=base64&l=x")
	f.Fuzz(func(t *testing.T, rawQuery string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		lk, err := parseLookup(q)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if lk.N < 1 || lk.N > maxCost || (lk.Enc != "text" && lk.Enc != "hex") {
			t.Fatalf("lookup %+v out of bounds", lk)
		}
		if lk.Limiter == "" {
			if lk.Key != "" {
				t.Fatalf("a key without a limiter: %+v", lk)
			}
			return
		}
		if lk.Key == "" || len(lk.Key) > MaxKeyBytes {
			t.Fatalf("key of %d bytes accepted", len(lk.Key))
		}
		back, err := parseLookup(url.Values{"l": {lk.Limiter}, "key": {lk.formKey()}, "enc": {lk.Enc}})
		if err != nil || back.Key != lk.Key {
			t.Fatalf("the form's key %q (%s) parses to %q, %v; want %q", lk.formKey(), lk.Enc, back.Key, err, lk.Key)
		}
		shown := cutDisplay(lk.Key, 256)
		if !utf8.ValidString(shown) || len(shown) > 4*256+64 || strings.ContainsAny(shown, "\x00\n\r") {
			t.Fatalf("display %q of key %q", shown, lk.Key)
		}
	})
}
