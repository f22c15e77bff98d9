package redisbackend

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/corekit"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/keyslot"
)

// The key schema: every Redis key redstream's engines use is built here.
//
// A key is
//
//	<prefix>:{<tag>}[:<role>]            when the user key is plain
//	<prefix>:{#<hash>}[:<role>]|<user>   otherwise
//
// A user key is plain when it is 1 to maxPlainTag bytes of printable ASCII without '{', '}'
// or a space and does not start with '#'; its tag is the key itself, so plain keys stay
// readable ("streaming:rl:{user:1}:sliding.60000000.10"). Any other key (braces, spaces,
// binary bytes, very long) gets the tag "#" + 16 hex digits of MurmurHash3 x64 128
// (corekit.Murmur3x64_128, seed 0, the first half, big-endian) and is appended whole after a
// '|', so two different user keys never share a Redis key. Roles never contain ':', '|', '{'
// or '}'. Redis Cluster hashes only the text between the first '{' and the first '}' after
// it; prefixes may not contain braces, so that text is always the tag, and every key built
// for one user key (all the keys of one script) lands in one slot whatever the user key
// holds.
//
// Roles: a limiter's is its Spec's fingerprint ("m<i>." + fingerprint for limit i of a
// multi-limiter), so limiters of different parameters never share a key; the
// deduplicators' are "set", "win" and "winhw", and "bf.<k>.<shard bits>.<shards>" for the
// Bloom filter. The Java implementation's layout (JavaCompatible, java.go) is the one
// exception to this schema: its keys are built by javaKey. testdata/keys.json holds
// vectors of the schema for other runtimes.

// maxPlainTag is the longest user key used as its own hash tag.
const maxPlainTag = 128

// maxBulk is the largest string Redis accepts in one argument (proto-max-bulk-len, 512 MB by
// default). A variable so tests can lower it.
var maxBulk = 512 << 20

// keySlack bounds the bytes a key adds around the user key: braces, separators, tag, role.
const keySlack = 64

// plain reports whether s can be its own hash tag.
func plain(s string) bool {
	if len(s) == 0 || len(s) > maxPlainTag || s[0] == '#' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || c == '{' || c == '}' {
			return false
		}
	}
	return true
}

// hashTag returns the tag of a non-plain user key.
func hashTag(s string) string {
	h1, _ := corekit.Murmur3x64_128([]byte(s), 0)
	var b [8]byte
	for i := range b {
		b[i] = byte(h1 >> (56 - 8*i))
	}
	return "#" + hex.EncodeToString(b[:])
}

// redisKey builds the key of role for user key u under prefix.
func redisKey(prefix, u, role string) string {
	var b strings.Builder
	if plain(u) {
		b.Grow(len(prefix) + len(u) + len(role) + 4)
		b.WriteString(prefix)
		b.WriteString(":{")
		b.WriteString(u)
		b.WriteByte('}')
		if role != "" {
			b.WriteByte(':')
			b.WriteString(role)
		}
		return b.String()
	}
	b.Grow(len(prefix) + len(u) + len(role) + 24)
	b.WriteString(prefix)
	b.WriteString(":{")
	b.WriteString(hashTag(u))
	b.WriteByte('}')
	if role != "" {
		b.WriteByte(':')
		b.WriteString(role)
	}
	b.WriteByte('|')
	b.WriteString(u)
	return b.String()
}

// checkPrefix validates a key prefix.
func checkPrefix(p string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("redisbackend: %w: key prefix %q contains a brace, which would break the hash tag", errInvalidConfig, p)
	}
	if len(p) > 4096 {
		return fmt.Errorf("redisbackend: %w: key prefix of %d bytes is longer than 4096", errInvalidConfig, len(p))
	}
	return nil
}

// checkSize reports a user key or element too large for one Redis argument.
func checkSize(what string, n int) error {
	if n > maxBulk-keySlack-4096 {
		return fmt.Errorf("redisbackend: %w: %s of %d bytes exceeds what Redis accepts in one argument (%d bytes)", ErrTooLarge, what, n, maxBulk)
	}
	return nil
}

// fingerprint returns the canonical form of a limit's parameters, which the key of every
// limiter not in JavaCompatible mode carries, so that two limiters whose parameters differ
// never read each other's state: the algorithm's name (core.Limit.Name), then each integer
// parameter (coreops.Ints: interval, tolerance and burst in µs and units for the buckets,
// window in µs and limit for the windows) in decimal, all joined by '.'. Examples:
//
//	redstream.SlidingWindow(time.Minute, 10)  sliding.60000000.10
//	redstream.TokenBucket(10, 5)              token-bucket.200000.2000000.10
//
// The key of a single limit is "<prefix>:{<tag>}:<fingerprint>", that of limit i of a
// multi-limiter "<prefix>:{<tag>}:m<i>.<fingerprint>" (followed by "|<user key>" for a key
// that is not plain; see the key schema above), e.g. "streaming:rl:{user:1}:sliding.60000000.10".
// The form is the same in every runtime that shares redstream's keys; the vectors in
// redisbackend/testdata/keys.json pin it (spec, parameters, fingerprint, Redis keys).
func fingerprint(p core.Limit) string {
	var b []byte
	b = append(b, p.Name()...)
	for _, x := range coreops.Ints(p) {
		b = append(b, '.')
		b = strconv.AppendInt(b, x, 10)
	}
	return string(b)
}

// specRole is the key role of a single-limit limiter of p.
func specRole(p core.Limit) string { return fingerprint(p) }

// limitRole is the key role of limit i, of p, of a multi-limiter.
func limitRole(i int, p core.Limit) string { return "m" + strconv.Itoa(i) + "." + fingerprint(p) }

// limiterKeys returns the Redis keys of user key u, one per role: the schema's keys, or with
// java the Java implementation's, "<prefix>:{<u>}" then "<prefix>:{<u>}:<role>" (javaKey).
func limiterKeys(prefix, u string, roles []string, java bool) []string {
	ks := make([]string, len(roles))
	for i, r := range roles {
		if java {
			ks[i] = javaKey(prefix, u, r)
		} else {
			ks[i] = redisKey(prefix, u, r)
		}
	}
	return ks
}

// checkKey validates a user key of a limiter before any Redis call.
func (l *Limiter) checkKey(key string) error {
	if err := checkSize("key", len(key)+len(l.prefix)); err != nil {
		return err
	}
	if l.java {
		return checkJavaKey(key)
	}
	return nil
}

// Roles of the deduplicators' keys.
const (
	roleSet        = "set"
	roleWindow     = "win"
	roleWindowMark = "winhw"
)

// bloomRole is the role of a Bloom filter's shard keys; it carries the sizing so that a
// filter re-created with other parameters never reads bits laid out for different ones.
func bloomRole(k int, shardBits uint64, shards int) string {
	return fmt.Sprintf("bf.%d.%d.%d", k, shardBits, shards)
}

// bloomShardKey is the key of shard i. With several shards each gets its own tag (the
// filter's name and the shard number), so shards spread over a cluster's slots.
func bloomShardKey(prefix, name, role string, shards, i int) string {
	if shards == 1 {
		return redisKey(prefix, name, role)
	}
	return redisKey(prefix, name+"/"+strconv.Itoa(i), role)
}

// slotOf returns the Redis Cluster slot of a key: CRC16 of its hash tag (the text between
// the first '{' and the next '}', when not empty) or of the whole key, modulo 16384.
func slotOf(key string) uint16 { return keyslot.Of(key) }
