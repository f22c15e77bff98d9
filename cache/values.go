package cache

import "strings"

// What a cache key can hold. Real values are the codec's bytes as they are (JSON by
// default, readable with redis-cli). The two markers start with a NUL byte, which no JSON
// text starts with; Set refuses a value from another codec that starts with markerPrefix.
const (
	// markerPrefix starts every marker.
	markerPrefix = "\x00redstream-cache:"
	// nullMarker caches a "not found" from the loader (penetration protection).
	nullMarker = markerPrefix + "null"
	// lockPrefix + owner token is the placeholder of a load in progress: the distributed
	// lock of GetOrLoad.
	lockPrefix = markerPrefix + "lock:"
)

// kind classifies what a key holds.
type kind uint8

const (
	kindMiss   kind = iota // no key
	kindValue              // a real, encoded value
	kindNull               // a null marker
	kindLocked             // a lock placeholder: a load is in progress
)

func (k kind) String() string {
	switch k {
	case kindMiss:
		return "miss"
	case kindValue:
		return "value"
	case kindNull:
		return "null"
	case kindLocked:
		return "locked"
	}
	return "unknown"
}

// classify tells what the stored string s holds.
func classify(s string) kind {
	if len(s) == 0 || s[0] != 0 {
		return kindValue
	}
	if s == nullMarker {
		return kindNull
	}
	if strings.HasPrefix(s, lockPrefix) {
		return kindLocked
	}
	return kindValue
}
