package stream

import (
	"os"
	"strings"
)

// Key schema. Every Redis key of the package is built here.
//
// A topic's stream key is the topic name itself (plus "_<env>" under env isolation), exactly
// as producers in other languages write it. Its dead-letter stream must live in the same
// hash slot, so that one script can move an entry between the two. Redis hashes a key by its
// first non-empty {hash tag}, or by the whole key when it has none; so:
//
//   - stream "orders" (no tag) has the slot of "orders", and so has "{orders}:dlq";
//   - stream "{shop}orders" (tag "shop") keeps its tag first in "{shop}orders:dlq".
//
// A name containing '}' outside a valid hash tag cannot be wrapped this way and is rejected.
// The idempotent list sink uses the same rule for its list and idempotency keys.

// deadLetterSuffix ends every dead-letter stream key.
const deadLetterSuffix = ":dlq"

// idemInfix separates a sink's list key from an idempotency key.
const idemInfix = ":idem:"

// Suffixes of a topic's delayed-delivery keys (see DelayedKeys).
const (
	delayedSuffix     = ":delayed"      // sorted set: scheduled message id -> due time (ms)
	delayedMsgsSuffix = ":delayed:msgs" // hash: scheduled message id -> encoded entry fields
)

// hashTag returns the hash tag Redis uses for key, and whether key has one: the text between
// the first '{' and the first '}' after it, when that text is non-empty.
func hashTag(key string) (string, bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "", false
	}
	return key[i+1 : i+1+j], true
}

// checkName validates a topic, stream or list name: non-empty, and wrappable in a hash tag.
func checkName(what, name string) error {
	if name == "" {
		return errInvalid("empty %s", what)
	}
	if _, ok := hashTag(name); !ok && strings.IndexByte(name, '}') >= 0 {
		return errInvalid("%s %q: '}' is only allowed as the end of a {hash tag}", what, name)
	}
	return nil
}

// slotPrefix returns a prefix that hashes like name: name itself when it has a hash tag,
// otherwise "{name}".
func slotPrefix(name string) string {
	if _, ok := hashTag(name); ok {
		return name
	}
	return "{" + name + "}"
}

// StreamName returns the Redis stream key of topic under cfg: topic, or topic + "_" + env
// when cfg.EnvIsolation is set and cfg.Env is non-empty. It returns an error wrapping
// redstream.ErrInvalidConfig for an empty topic or one containing '}' outside a {hash tag}.
func StreamName(cfg Config, topic string) (string, error) {
	if err := checkName("topic", topic); err != nil {
		return "", err
	}
	if cfg.EnvIsolation && cfg.Env != "" {
		return topic + "_" + cfg.Env, nil
	}
	return topic, nil
}

// DeadLetterStreamName returns the key of the dead-letter stream of stream (a key returned by
// StreamName): "{orders}:dlq" for "orders", "{shop}orders:dlq" for "{shop}orders". Both keys
// hash to the same cluster slot.
func DeadLetterStreamName(stream string) string {
	return slotPrefix(stream) + deadLetterSuffix
}

// DelayedKeys returns the keys holding the scheduled messages of stream (a key returned by
// StreamName): a sorted set of message ids scored by due time in milliseconds since the Unix
// epoch ("{orders}:delayed" for "orders") and a hash of their encoded entries
// ("{orders}:delayed:msgs"). Both share stream's hash slot, so one script moves due messages
// into the stream on Redis Cluster too.
func DelayedKeys(stream string) (schedule, messages string) {
	p := slotPrefix(stream)
	return p + delayedSuffix, p + delayedMsgsSuffix
}

// idemKey returns the key recording idempotency key id of the sink writing to list.
func idemKey(list, id string) string {
	return slotPrefix(list) + idemInfix + id
}

func pid() int { return os.Getpid() }
