// Package luagen writes the constants that package lua's scripts share with package core into
// the scripts, between the marker lines
//
//	-- BEGIN luagen: ...
//	-- END luagen
//
// so the Lua and the Go specification cannot drift apart. tools/luagen runs it through
// `go generate ./lua/...`; package lua's tests fail when a committed script is stale.
package luagen

import (
	"bytes"
	"fmt"

	"github.com/redstream-go/redstream/core"
)

// Constant is one value generated into the scripts as a Lua local.
type Constant struct {
	Name  string // the Lua name
	Value int64
	From  string // the Go expression it comes from
}

// Constants lists the generated constants, in the order they are written.
var Constants = []Constant{
	{"MICROS_PER_SECOND", core.Second, "core.Second"},
	{"MICROS_PER_MILLI", core.Millisecond, "core.Millisecond"},
	{"MAX_TIME", core.MaxTime, "core.MaxTime"},
	{"MAX_DURATION", core.MaxDuration, "core.MaxDuration"},
	{"KEY_TTL_MARGIN", core.KeyTTLMargin, "core.KeyTTLMargin"},
}

var (
	begin = []byte("-- BEGIN luagen")
	end   = []byte("-- END luagen")
)

// Region returns the generated lines that go between the markers.
func Region() []byte {
	var b bytes.Buffer
	for _, c := range Constants {
		fmt.Fprintf(&b, "local %s = %d -- %s\n", c.Name, c.Value, c.From)
	}
	return b.Bytes()
}

// Rewrite returns src with the lines between its markers replaced by Region, and whether the
// script has markers at all. A script with a BEGIN marker but no END marker after it is an
// error.
func Rewrite(src []byte) (out []byte, marked bool, err error) {
	i := bytes.Index(src, begin)
	if i < 0 {
		return src, false, nil
	}
	nl := bytes.IndexByte(src[i:], '\n')
	if nl < 0 {
		return nil, true, fmt.Errorf("luagen: BEGIN marker without a line end")
	}
	body := i + nl + 1
	j := bytes.Index(src[body:], end)
	if j < 0 {
		return nil, true, fmt.Errorf("luagen: BEGIN marker without an END marker")
	}
	out = make([]byte, 0, len(src)+256)
	out = append(out, src[:body]...)
	out = append(out, Region()...)
	out = append(out, src[body+j:]...)
	return out, true, nil
}
