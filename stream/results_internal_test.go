package stream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseResult(t *testing.T) {
	good := map[string]string{"state": "completed", "fence": "2", "updated": "1767225600000", "key": "k", "result": `{"n":1}`}
	r, err := parseResult("1-1", good)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != ResultCompleted || r.DeliveryCount != 2 || !r.Updated.Equal(time.UnixMilli(1767225600000)) || string(r.Value) != `{"n":1}` || r.Key != "k" {
		t.Fatalf("parseResult = %+v", r)
	}
	for field, v := range map[string]string{"state": "done", "fence": "x", "updated": "-5", "result": "{", "progress": "not json"} {
		m := map[string]string{}
		for k, x := range good {
			m[k] = x
		}
		m[field] = v
		if _, err := parseResult("1-1", m); err == nil || !strings.Contains(err.Error(), `field "`+field+`"`) {
			t.Errorf("%s = %q: error %v, want one naming the field", field, v, err)
		}
	}
}

// FuzzParseResult: any hash read back as a result record gives an error or a Result that
// marshals (its raw JSON is valid) and is in one of the three states.
func FuzzParseResult(f *testing.F) {
	f.Add("completed", "1", "1767225600000", `{"a":[1,2]}`, "")
	f.Add("active", "3", "0", "", `"half"`)
	f.Add("failed", "18446744073709551616", "x", "", "")
	f.Add("", "", "", "{", "\xff")
	f.Fuzz(func(t *testing.T, state, fence, updated, result, progress string) {
		m := map[string]string{"state": state, "fence": fence, "updated": updated, "error": progress}
		if result != "" {
			m["result"] = result
		}
		if progress != "" {
			m["progress"] = progress
		}
		r, err := parseResult("1-1", m)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "stream: the result record of 1-1 is malformed: field ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("Result %+v does not marshal: %v", r, err)
		}
		if r.State != ResultActive && r.State != ResultCompleted && r.State != ResultFailed {
			t.Fatalf("state %q", r.State)
		}
	})
}
