package streamwire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/keyslot"
)

// Key schema. Every Redis key of a topic is built here (stream/WIRE.md).
//
// A topic's stream key is the topic name itself (plus "_<env>" under env isolation), exactly
// as producers in other languages write it. Its dead-letter stream must live in the same
// hash slot, so that one script can move an entry between the two. Redis hashes a key by its
// first non-empty {hash tag}, or by the whole key when it has none; so:
//
//   - stream "orders" (no tag) has the slot of "orders", and so has "{orders}:dlq";
//   - stream "{shop}orders" (tag "shop") keeps its tag first in "{shop}orders:dlq".
//
// A name containing '}' outside a valid hash tag cannot be wrapped this way (CheckName).

// DeadLetterSuffix ends every dead-letter stream key, and names the dead letters of a topic
// in the topic label of their metrics ("orders:dlq").
const DeadLetterSuffix = ":dlq"

// Suffixes of a topic's delayed-delivery keys (see DelayedKeys).
const (
	delayedSuffix     = ":delayed"      // sorted set: scheduled message id -> due time (ms)
	delayedMsgsSuffix = ":delayed:msgs" // hash: scheduled message id -> encoded entry fields
)

// SlotPrefix returns a prefix that hashes like name: name itself when it has a hash tag,
// otherwise "{name}".
func SlotPrefix(name string) string {
	if _, ok := keyslot.HashTag(name); ok {
		return name
	}
	return "{" + name + "}"
}

// CheckName returns why name cannot be a topic, stream or list name (what says which: "topic"),
// or nil: it must be non-empty, with '}' only as the end of a {hash tag}. The message has no
// package prefix.
func CheckName(what, name string) error {
	if name == "" {
		return errors.New("empty " + what)
	}
	if _, ok := keyslot.HashTag(name); !ok && strings.IndexByte(name, '}') >= 0 {
		return fmt.Errorf("%s %q: '}' is only allowed as the end of a {hash tag}", what, name)
	}
	return nil
}

// StreamKey is StreamName of a topic CheckName accepts; otherwise an error "stream: <why>"
// wrapping redstream.ErrInvalidConfig, as package stream reports it.
func StreamKey(topic string, envIsolation bool, env string) (string, error) {
	if err := CheckName("topic", topic); err != nil {
		return "", fmt.Errorf("stream: %v: %w", err, redstream.ErrInvalidConfig)
	}
	return StreamName(topic, envIsolation, env), nil
}

// StreamName returns the stream key of topic: topic, or topic + "_" + env when envIsolation
// is set and env is non-empty. It does not validate topic.
func StreamName(topic string, envIsolation bool, env string) string {
	if envIsolation && env != "" {
		return topic + "_" + env
	}
	return topic
}

// DeadLetterStreamName returns the key of the dead-letter stream of stream (a stream key):
// "{orders}:dlq" for "orders", "{shop}orders:dlq" for "{shop}orders". Both keys hash to the
// same cluster slot.
func DeadLetterStreamName(stream string) string {
	return SlotPrefix(stream) + DeadLetterSuffix
}

// DelayedKeys returns the keys holding the scheduled messages of stream (a stream key): a
// sorted set of message ids scored by due time in milliseconds since the Unix epoch
// ("{orders}:delayed" for "orders") and a hash of their encoded entries
// ("{orders}:delayed:msgs"). Both share stream's hash slot, so one script moves due messages
// into the stream on Redis Cluster too.
func DelayedKeys(stream string) (schedule, messages string) {
	p := SlotPrefix(stream)
	return p + delayedSuffix, p + delayedMsgsSuffix
}

// UniqueKeys returns the keys of the unique ids of messages sent to stream with
// WithUnique (xadd_unique.lua): a hash of id -> record ("e|<entry id>" or "s|<schedule id>",
// "{orders}:unique"), the sorted set of their expiry times in ms ("{orders}:unique:exp") and
// the hash linking scheduled messages to their id ("{orders}:delayed:unique"). All share
// stream's hash slot, with its delayed-delivery keys.
func UniqueKeys(stream string) (records, expiry, links string) {
	p := SlotPrefix(stream)
	return p + ":unique", p + ":unique:exp", p + delayedSuffix + ":unique"
}

// PartitionLeaseKey returns the key of the lease by which one consumer of group owns the
// partition stream: "{orders:p0:52}:owner:<group>", in the partition's slot. It holds the
// owner's consumer name and expires unless renewed.
func PartitionLeaseKey(stream, group string) string {
	return SlotPrefix(stream) + ":owner:" + group
}

// PartitionMembersKey returns the key of the sorted set of the live consumers of group that
// share the partitions of the topic whose stream key is stream: "{orders}:members:<group>".
// Each member is scored by the time it expires, in ms.
func PartitionMembersKey(stream, group string) string {
	return SlotPrefix(stream) + ":members:" + group
}

// DeadLetterMarkKey returns the key of the marks dlq_mark.lua writes during the large moves
// and replays of dlq's topic: dlq + ":mark", in dlq's hash slot. It holds a string for the
// duration of one MULTI/EXEC (and expires after 60 s in any case).
func DeadLetterMarkKey(dlq string) string { return dlq + ":mark" }

// SentKey returns the key recording the idempotency key id of a message sent to stream on
// servers without XADD IDMP (xadd_idem.lua): "{orders}:sent:<id>" for "orders", in the
// stream's slot. It holds the entry id and expires after 100 s.
func SentKey(stream, id string) string { return SlotPrefix(stream) + ":sent:" + id }

// ResultKeys returns the keys of the results a handler of group records for the entries of
// stream (stream.Handler.Results): the prefix of each entry's record, a hash at prefix + id
// ("{orders}:result:billing:1700000000000-0"), and the sorted set indexing the records by
// expiry (ms), which bounds their number ("{orders}:results:billing"). All are in stream's
// slot.
func ResultKeys(stream, group string) (recordPrefix, index string) {
	p := SlotPrefix(stream)
	return p + ":result:" + group + ":", p + ":results:" + group
}

// MaxPriorities is the most priority levels a topic may have (stream.Config.Priorities).
const MaxPriorities = 16

// PriorityName returns the stream of priority level p (1 to MaxPriorities-1) of the topic
// whose stream key is stream: "{orders}:prio:2" for "orders", in the stream's slot. Level 0
// is stream itself.
func PriorityName(stream string, p int) string {
	if p == 0 {
		return stream
	}
	return SlotPrefix(stream) + ":prio:" + strconv.Itoa(p)
}

// IDMPProbeKey returns the key a producer probes XADD IDMP on (with NOMKSTREAM: it is never
// created), in stream's slot.
func IDMPProbeKey(stream string) string { return SlotPrefix(stream) + ":idmp-probe" }

// IdemKey returns the key recording idempotency key id of the idempotent list sink writing
// to list: "{list}:idem:<id>" (or "list:idem:<id>" when list has a hash tag).
func IdemKey(list, id string) string { return SlotPrefix(list) + ":idem:" + id }

// Partitioned topics. A topic of P > 1 partitions is P streams, one per partition, each
// under a hash tag of its own, so that a cluster spreads them over its masters. Partition i
// of the stream s (the topic's stream key, which must have no hash tag) is the key
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
// producers in other languages compute them with this rule, and the test vectors in
// stream/testdata/partitions.json pin them.

// MaxPartitions is the largest number of partitions of one topic.
const MaxPartitions = 1024

// maxPartitionSearch bounds the search of PartitionName.
const maxPartitionSearch = 1 << 22

// PartitionName returns the key of partition i of n of stream (the rule above).
func PartitionName(stream string, i, n int) string {
	c := (2*i + 1) * keyslot.Count / (2 * n)
	h := keyslot.Count / (8 * n)
	base := "{" + stream + ":p" + strconv.Itoa(i) + ":"
	for k := range maxPartitionSearch {
		name := base + strconv.Itoa(k) + "}"
		if d := int(keyslot.Of(name)) - c; d >= -h && d <= h {
			return name
		}
	}
	return base + "0}" // not reached: every window of 5 slots has a name among the first thousands
}

// PartitionOf returns the partition, 0 to n-1, of a message with key in a topic of n
// partitions: FNV-1a (32 bits) of the key's bytes, modulo n; 0 when n <= 1. It is the
// producer's rule for messages with a key.
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

// PeriodicKeys returns the keys of periodic delivery (package stream/periodic) on stream (a
// stream key): the hash of the topic's registered schedules, name -> definition (JSON),
// "{orders}:periodic" for "orders", and the hash of schedule name's state (last decided
// tick, paused, counts), "{orders}:periodic:<name>". Both share stream's hash slot, so one
// script claims a tick and XADDs its entry on Redis Cluster too.
func PeriodicKeys(stream, name string) (schedules, state string) {
	p := SlotPrefix(stream) + ":periodic"
	return p, p + ":" + name
}

// PeriodicIndexKey is the set of the stream keys that have registered schedules, for
// listing them all (a key of its own slot, written apart from the schedules).
const PeriodicIndexKey = "redstream:periodic"

// CompareIDs orders two stream entry ids ("ms-seq", or "ms") numerically.
func CompareIDs(a, b string) int {
	am, as := splitID(a)
	bm, bs := splitID(b)
	if c := compareDigits(am, bm); c != 0 {
		return c
	}
	return compareDigits(as, bs)
}

func splitID(id string) (ms, seq string) {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			return id[:i], id[i+1:]
		}
	}
	return id, ""
}

// compareDigits compares two decimal numbers without leading zeros.
func compareDigits(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// historySuffix starts the keys of a stream's per-minute history (see HistoryKey).
const historySuffix = ":stats:"

// HistoryKey returns the key of stream's history for the minute starting at minute (Unix
// seconds / 60): a hash of "<kind>|<group>" -> count, kind one of HistoryKinds, written by
// the consumers ("{orders}:stats:29606420" for "orders"), in the stream's slot, expiring
// HistoryTTL after its last write.
func HistoryKey(stream string, minute int64) string {
	return SlotPrefix(stream) + historySuffix + strconv.FormatInt(minute, 10)
}

// HistoryKinds are the counts a stream's history keeps per group and minute: entries
// handled successfully, handler failures, failures left for a retry, and entries moved to
// the dead-letter stream.
var HistoryKinds = [...]string{"processed", "failed", "retried", "dead"}

// HistoryTTL is how long a minute of history lives after its last write.
const HistoryTTL = 25 * time.Hour
