//go:build race

package memory

// raceEnabled reports whether the race detector is on, which makes allocation counts
// meaningless.
const raceEnabled = true
