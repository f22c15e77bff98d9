package stream

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"time"
)

// Failures are logged at Warn, one record per dead-lettered entry and per handler panic, so
// they are visible at the default level. A burst (a poison flood, a handler that panics on
// every entry) is bounded: at most failureLogBurst records per failureLogPeriod per handler
// and kind; the records left out are counted in the next one ("suppressed").
const (
	failureLogBurst  = 10
	failureLogPeriod = 10 * time.Second
)

// logGate admits at most burst events per period and counts the others.
type logGate struct {
	mu         sync.Mutex
	start      time.Time // start of the current period
	n          int       // events admitted in it
	suppressed int       // events left out since the last admitted one
}

// admit reports whether an event at now may be logged and, if so, how many were left out
// before it.
func (g *logGate) admit(now time.Time) (ok bool, suppressed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.start) >= failureLogPeriod || now.Before(g.start) {
		g.start, g.n = now, 0
	}
	if g.n >= failureLogBurst {
		g.suppressed++
		return false, 0
	}
	g.n++
	suppressed, g.suppressed = g.suppressed, 0
	return true, suppressed
}

// firstLine returns s up to its first line break, with " …" when more followed.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// panicSite returns "function file:line" of the frame that called panic in a
// debug.Stack, or "" when it cannot be found.
func panicSite(stack []byte) string {
	lines := bytes.Split(stack, []byte("\n"))
	for i := 0; i+3 < len(lines); i++ {
		if !bytes.HasPrefix(lines[i], []byte("panic(")) {
			continue
		}
		// lines[i+1] is panic's own file; then the panicking function and its file.
		fn := strings.TrimSpace(string(lines[i+2]))
		file := strings.TrimSpace(string(lines[i+3]))
		if j := strings.LastIndex(file, " +0x"); j >= 0 {
			file = file[:j]
		}
		if k := strings.LastIndex(fn, "("); k > 0 {
			fn = fn[:k]
		}
		return fn + " " + file
	}
	return ""
}

// deadLetterReason is the dl_error recorded for a failure: its error text and, for a
// panic, the stack after it.
func deadLetterReason(err error) string {
	var pe *PanicError
	if errors.As(err, &pe) && len(pe.Stack) > 0 {
		return err.Error() + "\n" + string(pe.Stack)
	}
	return err.Error()
}
