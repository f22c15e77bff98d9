package redisbackend

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// Interoperation with the Java implementation (the Spring Boot starters redstream's
// configuration keys come from). By default redstream's keys never meet the Java side's:
// limiter keys carry the Spec's fingerprint, deduplicator keys a role, so a mixed fleet
// keeps two disjoint sets of state. With Options.JavaCompatible (limiters) or
// DedupOptions.JavaCompatible (deduplicators) an engine reads and writes the Java layout
// instead, so that Go and Java processes share limits and dedup state during a migration:
//
//	sliding window   sorted set "<prefix>:{<key>}", member "<ms>:<seq>", score = ms, and the
//	                 counter "<prefix>:{<key>}:seq" (INCRBY); both PEXPIRE window
//	token bucket     hash "<prefix>:{<key>}:tb", fields tokens (a decimal, fractional) and ts
//	                 (ms); PEXPIRE max(2000 ms, two full refills)
//	set dedup        the set at the bare name (SADD), no prefix, no TTL unless SetTTL
//
// The Java side has no Redis layout for the leaky bucket, the sliding counter, the fixed
// window and multi-limits (its leaky bucket is in-process only), and its Bloom filter is
// Redisson's own (its hash functions and a configuration key), which redstream does not
// reimplement; the windowed deduplicator's Java layout is not read either. Asking for
// JavaCompatible with those is an error wrapping redstream.ErrInvalidConfig, never a
// silent fallback to redstream's own keys.

// ErrForeignState is returned (wrapped, with the key and what it holds) when a script finds a
// key holding state it did not write: another type, or a value in another format (another
// library, a limiter of an older key schema, the Java implementation's layout where
// JavaCompatible is off, or the reverse). It is a Redis failure to the limiter: its
// FailurePolicy applies. The key is left as it was.
var ErrForeignState = errors.New("redisbackend: foreign state")

var (
	scriptJavaSlidingWindow = newScript("java_sliding_window.lua")
	scriptJavaTokenBucket   = newScript("java_token_bucket.lua")
)

var errJavaMulti = fmt.Errorf("redisbackend: %w: JavaCompatible: the Java implementation has no multi-limit layout", errInvalidConfig)

// javaTokenBucketMinTTL is the Java token bucket's shortest key TTL.
const javaTokenBucketMinTTL = 2000 * time.Millisecond

// javaKey is the Java implementation's key of user key u: "<prefix>:{<u>}", then ":<role>"
// when role is not empty. u is used as it is (the Java side does no escaping).
func javaKey(prefix, u, role string) string {
	if role == "" {
		return prefix + ":{" + u + "}"
	}
	return prefix + ":{" + u + "}:" + role
}

// checkJavaKey rejects a user key whose Java keys would not share a hash tag: one starting
// with '}' makes the tag of "<prefix>:{<u>}" empty, so Redis Cluster hashes each key whole.
func checkJavaKey(u string) error {
	if strings.HasPrefix(u, "}") {
		return fmt.Errorf("redisbackend: key %q starts with '}': in the Java layout its keys would have no hash tag and land in different cluster slots", shortKey(u))
	}
	return nil
}

func shortKey(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// useJava makes l a limiter of the Java layout (Options.JavaCompatible).
func (l *Limiter) useJava(spec redstream.Spec, p core.Limit) error {
	switch spec.Algorithm {
	case redstream.AlgorithmSlidingWindow:
		if spec.Window%time.Millisecond != 0 {
			return fmt.Errorf("redisbackend: %w: JavaCompatible: window %v is not a whole number of milliseconds, the Java layout's unit", errInvalidConfig, spec.Window)
		}
		l.roles = []string{"", "seq"}
		l.script = scriptJavaSlidingWindow
		l.params = []string{strconv.FormatInt(spec.Window.Milliseconds(), 10), strconv.FormatInt(p.Max(), 10)}
	case redstream.AlgorithmTokenBucket:
		// The Java side admits while at least one whole token is left: a full bucket
		// admits floor(capacity) at once.
		l.limit = int64(math.Floor(spec.Capacity))
		refill := min(math.Ceil(spec.Capacity/spec.Rate*1e3), 1e15) // ms
		ttl := max(javaTokenBucketMinTTL.Milliseconds(), 2*int64(refill))
		l.roles = []string{"tb"}
		l.script = scriptJavaTokenBucket
		l.params = []string{
			strconv.FormatFloat(spec.Capacity, 'g', 17, 64), strconv.FormatFloat(spec.Rate, 'g', 17, 64),
			strconv.FormatInt(l.limit, 10), strconv.FormatInt(ttl, 10),
		}
	default:
		return fmt.Errorf("redisbackend: %w: JavaCompatible: the Java implementation has no Redis layout for %s (only sliding and token-bucket)", errInvalidConfig, spec.Algorithm)
	}
	l.java = true
	return nil
}

// limits is the number of decisions one user key's reply holds: one per role, except in the
// Java layout, whose sliding window takes two keys for one decision.
func (l *Limiter) limits() int {
	if l.java {
		return 1
	}
	return len(l.roles)
}

// foreignError marks a script's foreign-state error reply as ErrForeignState.
type foreignError struct{ err error }

func (e foreignError) Error() string        { return e.err.Error() }
func (e foreignError) Unwrap() error        { return e.err }
func (e foreignError) Is(target error) bool { return target == ErrForeignState }

// classify returns err, marked as ErrForeignState when it is a script's foreign-state reply
// (lib/guard.lua).
func classify(err error) error {
	if e, ok := rueidis.IsRedisErr(err); ok && strings.Contains(e.Error(), ": foreign state: ") {
		return foreignError{err}
	}
	return err
}

// javaDedupKey returns the key of a deduplicator in the Java layout (the bare name), or
// an error for a strategy or options without one.
func javaDedupKey(name string, strategy redstream.DedupStrategy, opts DedupOptions) (string, error) {
	if strategy != redstream.DedupSet {
		return "", fmt.Errorf("redisbackend: %w: JavaCompatible: the Java %s deduplicator's layout is not shared (only set)", errInvalidConfig, strategy)
	}
	if !isBlank(opts.KeyPrefix) {
		return "", fmt.Errorf("redisbackend: %w: JavaCompatible: the Java set deduplicator's key is the bare name; KeyPrefix %q would not apply", errInvalidConfig, opts.KeyPrefix)
	}
	return name, nil
}
