//go:build !race

package redisbackend

// raceEnabled reports a -race build, whose sync.Pool drops entries on purpose.
const raceEnabled = false
