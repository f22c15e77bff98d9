package engine

import (
	"time"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock in nanoseconds, the clock time.Now reads for its
// monotonic reading. It is one of the runtime functions the Go project keeps reachable by
// linkname (go.dev/issue/67401), and costs about half of time.Now, which also reads the
// wall clock.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// The default clock's anchor: the wall clock (µs since the epoch) and the monotonic clock
// (ns) read together when the package is initialized.
var (
	anchorWall = time.Now().UnixMicro()
	anchorMono = nanotime()
)

// MonoMicros returns the default clock in core units: the wall clock at the anchor advanced
// by the monotonic time elapsed since. It follows time.Now to within the steps applied to
// the system clock since the anchor, and never goes backwards.
func MonoMicros() int64 {
	return anchorWall + (nanotime()-anchorMono)/1000
}
