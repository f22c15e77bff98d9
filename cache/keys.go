package cache

// This file builds every Redis key the cache touches.
//
// A cache entry is one Redis string at KeyPrefix [+ Env + ":"] + key: the Java starter's layout, so
// keys written by the Java starter and by this package coincide. The distributed lock of
// GetOrLoad lives in that same key, as a placeholder value (see values.go), not in a second
// key: every command and script touches exactly one key, so the cache is cluster-safe for
// any user key (braces and binary bytes included) without hash tags, and deleting or
// overwriting a key while it is being loaded also discards the load's result.

import (
	"strconv"
	"strings"
	"sync"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/keyslot"
)

// keyspace builds the Redis keys of one Cache.
type keyspace struct {
	prefix string // KeyPrefix, plus Env + ":" under env isolation
}

func newKeyspace(cfg *Config) keyspace {
	p := cfg.KeyPrefix
	if cfg.EnvIsolation && cfg.Env != "" {
		p += cfg.Env + ":"
	}
	return keyspace{prefix: p}
}

// data returns the Redis key holding the entry of the user key key.
func (k keyspace) data(key string) string { return k.prefix + key }

// The heartbeat of client-side caching (heartbeat.go) reads keys that nobody writes, under
// the cache's prefix and the reserved marker prefix: KeyPrefix [+ Env + ":"] +
// "\x00redstream-cache:heartbeat:{<tag>}". rueidis sends a client-side cached read through
// the connection (of the node holding the key's hash slot) numbered slot & (connections-1),
// at most 1<<rueidis.MaxPipelineMultiplex connections per node; the tags are chosen so
// that the keys' slots take every value modulo heartbeatSlots, which reaches every
// connection of a single server however many rueidis opens. On a cluster they are spread
// four to each block of 256 slots (slots 260*j to 260*j+3), so that a node owning a range
// of at least 263 contiguous slots is reached on up to four connections.
const heartbeatSlots = 1 << rueidis.MaxPipelineMultiplex

// heartbeatTarget is the slot of the heartbeat key r: r modulo heartbeatSlots.
func heartbeatTarget(r int) uint16 { return uint16(heartbeatSlots*(r/4) + r) }

// heartbeatTags holds, for every r, a hash tag whose slot is heartbeatTarget(r).
var heartbeatTags = sync.OnceValue(func() []string {
	want := make(map[uint16]int, heartbeatSlots)
	for r := range heartbeatSlots {
		want[heartbeatTarget(r)] = r
	}
	tags := make([]string, heartbeatSlots)
	for n, left := 0, heartbeatSlots; left > 0; n++ {
		tag := strconv.Itoa(n)
		if r, ok := want[keyslot.Of(tag)]; ok {
			tags[r] = tag
			delete(want, heartbeatTarget(r))
			left--
		}
	}
	return tags
})

// slots is the number of Redis Cluster hash slots.
const slots = keyslot.Count

// heartbeat returns the keys the heartbeat of client-side caching reads.
func (k keyspace) heartbeat() []string {
	base := k.prefix + markerPrefix + "heartbeat:"
	if !strings.Contains(k.prefix, "{") {
		tags := heartbeatTags()
		keys := make([]string, len(tags))
		for i, tag := range tags {
			keys[i] = base + "{" + tag + "}"
		}
		return keys
	}
	// The prefix takes part in the hash tag. With a whole tag of its own, every key of the
	// cache has one slot, so one connection per node carries them all: one key reaches it.
	if open := strings.IndexByte(k.prefix, '{'); open >= 0 {
		if end := strings.IndexByte(k.prefix[open+1:], '}'); end > 0 {
			return []string{base}
		}
	}
	// Otherwise search suffixes until the slots take every value modulo heartbeatSlots.
	var keys []string
	seen := make(map[uint16]bool, heartbeatSlots)
	for n := 0; len(keys) < heartbeatSlots && n < 1<<20; n++ {
		key := base + strconv.Itoa(n)
		if r := keyslot.Of(key) % heartbeatSlots; !seen[r] {
			seen[r] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// refresh returns the key of the eager refresh lock of the user key key: KeyPrefix [+ Env
// + ":"] + "\x00redstream-cache:refresh:" + key. It is a key of its own (the entry keeps
// its value while it is refreshed), set with SET NX PX by itself, so its slot does not
// matter on a cluster.
func (k keyspace) refresh(key string) string { return k.prefix + markerPrefix + "refresh:" + key }

// tag returns the key of a tag's generation (see tags.go): KeyPrefix [+ Env + ":"] +
// "\x00redstream-cache:tag:" + tag. A key of its own, read and written by itself, so its
// slot does not matter on a cluster.
func (k keyspace) tag(tag string) string { return k.prefix + markerPrefix + "tag:" + tag }
