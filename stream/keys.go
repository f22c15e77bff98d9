package stream

import (
	"os"
	"strconv"
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

// PartitionLeaseKey returns the key of the lease by which one consumer of group owns the
// partition stream (Handler.OwnPartitions): "{orders:p0:52}:owner:<group>", in the
// partition's slot. It holds the owner's consumer name and expires unless renewed.
func PartitionLeaseKey(stream, group string) string {
	return slotPrefix(stream) + ":owner:" + group
}

// PartitionMembersKey returns the key of the sorted set of the live consumers of group that
// share the partitions of the topic whose StreamName is stream (Handler.OwnPartitions):
// "{orders}:members:<group>". Each member is scored by the time it expires, in ms.
func PartitionMembersKey(stream, group string) string {
	return slotPrefix(stream) + ":members:" + group
}

// idemKey returns the key recording idempotency key id of the sink writing to list.
func idemKey(list, id string) string {
	return slotPrefix(list) + idemInfix + id
}

func pid() int { return os.Getpid() }

// Partitioned topics. A topic of P > 1 partitions (Config.Partitions) is P streams, one per
// partition, each under a hash tag of its own, so that a cluster spreads them over its
// masters. Partition i of the stream s (the topic's StreamName, which must have no hash tag)
// is the key
//
//	"{" + s + ":p" + i + ":" + n + "}"    e.g. "{orders:p0:3}"
//
// where n is the smallest non-negative integer that puts the key's slot (CRC16/XMODEM of the
// tag, modulo 16384, as Redis Cluster hashes) within h = 16384/(8P) slots of the centre
// c = (2i+1)·16384/(2P) of the i-th of P equal slot ranges (integer division throughout).
// The partitions' slots are thus spread evenly over the slot space, whatever the topic's
// name: on a cluster whose M masters hold equal contiguous slot ranges (what
// `redis-cli --cluster create` does) every master holds at least one partition when P >= M
// (for P = 4 on 3 masters: partitions 0 and 3 on the first and last, 1 and 2 on the middle
// one). Each partition's dead-letter stream and delayed-delivery keys follow from its name
// as for any stream ("{orders:p0:3}:dlq"). The names are part of the wire contract:
// producers in other languages compute them with this rule (PartitionStreams is the
// reference), and the test vectors in testdata/partitions.json pin them.

// MaxPartitions is the largest number of partitions of one topic.
const MaxPartitions = 1024

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// crcTable is CRC16/XMODEM (polynomial 0x1021), Redis Cluster's key hash.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// KeySlot returns the Redis Cluster hash slot of key: CRC16/XMODEM of its hash tag (see
// hashTag) or of the whole key, modulo 16384.
func KeySlot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return int(crc & (clusterSlots - 1))
}

// partitionName returns the key of partition i of n of stream (the rule above).
func partitionName(stream string, i, n int) string {
	c := (2*i + 1) * clusterSlots / (2 * n)
	h := clusterSlots / (8 * n)
	base := "{" + stream + ":p" + strconv.Itoa(i) + ":"
	for k := range maxPartitionSearch {
		name := base + strconv.Itoa(k) + "}"
		if d := KeySlot(name) - c; d >= -h && d <= h {
			return name
		}
	}
	return base + "0}" // not reached: every window of 5 slots has a name among the first thousands
}

// maxPartitionSearch bounds the search of partitionName.
const maxPartitionSearch = 1 << 22

// partitionCount returns the number of streams of topic under cfg: Config.Partitions[topic],
// 1 when it is 0 or 1 (or absent).
func partitionCount(cfg Config, topic string) int {
	return max(cfg.Partitions[topic], 1)
}

// PartitionStreams returns the Redis stream keys of topic under cfg, partition i at index i:
// the single StreamName for an unpartitioned topic (Config.Partitions[topic] 0 or 1), else
// the names of the rule above. It returns an error wrapping redstream.ErrInvalidConfig for a
// bad topic name, a partition count out of range, or a partitioned topic whose name has a
// hash tag (the tag would pin every partition to one slot).
func PartitionStreams(cfg Config, topic string) ([]string, error) {
	s, err := StreamName(cfg, topic)
	if err != nil {
		return nil, err
	}
	n := cfg.Partitions[topic]
	if err := checkPartitions(topic, n); err != nil {
		return nil, err
	}
	if n <= 1 {
		return []string{s}, nil
	}
	if _, ok := hashTag(s); ok {
		return nil, errInvalid("topic %q: a partitioned topic cannot have a {hash tag} (it would pin every partition to one slot)", topic)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = partitionName(s, i, n)
	}
	return out, nil
}

// checkPartitions validates a partition count.
func checkPartitions(topic string, n int) error {
	if n < 0 || n > MaxPartitions {
		return errInvalid("topic %q: %d partitions: want 0 to %d (0 or 1: one stream)", topic, n, MaxPartitions)
	}
	return nil
}

// PartitionOf returns the partition, 0 to n-1, of a message with key in a topic of n
// partitions: FNV-1a (32 bits) of the key's bytes, modulo n; 0 when n <= 1. It is the
// producer's rule for messages with a key (see Producer.Send for messages without one).
func PartitionOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}
