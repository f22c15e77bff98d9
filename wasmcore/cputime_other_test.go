//go:build !linux

package wasmcore

import "time"

var epoch = time.Now()

// cpuNow falls back to the monotonic wall clock where the thread's CPU time is not read.
func cpuNow() time.Duration { return time.Since(epoch) }
