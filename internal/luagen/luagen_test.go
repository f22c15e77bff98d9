package luagen

import (
	"bytes"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	const head = "-- BEGIN luagen: constants. DO NOT EDIT.\n"
	const tail = "-- END luagen\nreturn MAX_TIME\n"
	tests := []struct {
		name    string
		src     string
		want    string
		marked  bool
		wantErr string
	}{
		{"empty region", head + tail, head + string(Region()) + tail, true, ""},
		{"stale region", head + "local MAX_TIME = 1\n" + tail, head + string(Region()) + tail, true, ""},
		{"no markers", "return 1\n", "return 1\n", false, ""},
		{"no end marker", head + "return 1\n", "", true, "without an END marker"},
		{"no line end", "-- BEGIN luagen", "", true, "without a line end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, marked, err := Rewrite([]byte(tt.src))
			if marked != tt.marked {
				t.Errorf("marked = %v, want %v", marked, tt.marked)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			again, _, _ := Rewrite(got)
			if !bytes.Equal(again, got) {
				t.Errorf("Rewrite is not idempotent:\n%s", again)
			}
		})
	}
}

func TestRegionValues(t *testing.T) {
	r := string(Region())
	for _, want := range []string{"local MICROS_PER_SECOND = 1000000 -- core.Second\n", "local MAX_TIME = 4503599627370496 -- core.MaxTime\n",
		"local KEY_TTL_MARGIN = 60000000 -- core.KeyTTLMargin\n"} {
		if !strings.Contains(r, want) {
			t.Errorf("Region() lacks %q:\n%s", want, r)
		}
	}
}
