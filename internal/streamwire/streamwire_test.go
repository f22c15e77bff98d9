package streamwire

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redstream-go/redstream"
)

// TestWireDocument: stream/WIRE.md names every field, encoding and key this package writes,
// with the examples it gives, so the document cannot drift from the code.
func TestWireDocument(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "stream", "WIRE.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	sched, msgs := DelayedKeys("orders")
	recs, exps, links := UniqueKeys("orders")
	for _, want := range []string{
		strings.Replace(recs, "{orders}", "{<stream>}", 1), strings.Replace(exps, "{orders}", "{<stream>}", 1),
		strings.Replace(links, "{orders}", "{<stream>}", 1),
		"`" + FieldKey + "`", "`" + FieldTag + "`", "`" + FieldEnc + "`", "`" + FieldBody + "`", "`" + FieldTS + "`",
		"`" + EncPlain + "`", "`" + EncGzip + "`", "`" + HeaderPrefix + "traceparent`",
		DeadLetterStreamName("orders"), DeadLetterStreamName("{shop}orders"),
		strings.Replace(sched, "{orders}", "{<stream>}", 1), strings.Replace(msgs, "{orders}", "{<stream>}", 1),
		strings.Replace(PartitionLeaseKey("orders", "<group>"), "{orders}", "{<stream>}", 1),
		strings.Replace(PartitionMembersKey("orders", "<group>"), "{orders}", "{<stream>}", 1),
		PartitionName("orders", 0, 4), PartitionName("orders", 0, 4) + DeadLetterSuffix,
		strings.Replace(SentKey("orders", "<key>"), "{orders}", "{<stream>}", 1),
		strings.Replace(IDMPProbeKey("orders"), "{orders}", "{<stream>}", 1),
		strings.Replace(IdemKey("list", "<key>"), "{list}", "{<list>}", 1),
		DeadLetterMarkKey(DeadLetterStreamName("orders")),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("stream/WIRE.md does not mention %s", want)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{StreamName("orders", false, "dev"), "orders"},
		{StreamName("orders", true, "dev"), "orders_dev"},
		{StreamName("orders", true, ""), "orders"},
		{DeadLetterStreamName("orders"), "{orders}:dlq"},
		{DeadLetterStreamName("{shop}orders"), "{shop}orders:dlq"},
		{PartitionLeaseKey("{orders:p0:52}", "g"), "{orders:p0:52}:owner:g"},
		{PartitionMembersKey("orders", "g"), "{orders}:members:g"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if s, m := DelayedKeys("orders"); s != "{orders}:delayed" || m != "{orders}:delayed:msgs" {
		t.Errorf("DelayedKeys = %q, %q", s, m)
	}
	for _, bad := range []string{"", "a}b"} {
		if _, err := StreamKey(bad, false, ""); !errors.Is(err, redstream.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "stream: ") {
			t.Errorf("StreamKey(%q) = %v, want a stream: error wrapping ErrInvalidConfig", bad, err)
		}
	}
}

func TestBodyRoundTrip(t *testing.T) {
	js := []byte(`{"id":1}`)
	for _, gz := range []bool{false, true} {
		enc, body, err := EncodeBody(js, gz)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeBody(enc, body, 1<<20)
		if err != nil || string(got) != string(js) {
			t.Errorf("gzip %v: decoded %q, %v", gz, got, err)
		}
	}
	enc, body, _ := EncodeBody([]byte(strings.Repeat("x", 100)), true)
	if _, err := DecodeBody(enc, body, 99); !errors.Is(err, ErrUndecodable) {
		t.Errorf("body above the bound: %v, want ErrUndecodable", err)
	}
	if _, err := DecodeBody("zstd", "x", 99); !errors.Is(err, ErrUndecodable) {
		t.Errorf("unknown enc: %v, want ErrUndecodable", err)
	}
}
