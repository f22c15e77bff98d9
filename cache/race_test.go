//go:build race

package cache

// raceOn reports a -race build, whose reads are several times slower.
const raceOn = true
