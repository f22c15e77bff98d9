package stream

import (
	"os"

	"github.com/redstream-go/redstream/internal/keyslot"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// Key schema. Every Redis key of the package is built by package streamwire (its keys.go),
// the wire contract of WIRE.md; this file validates the names keys are built from. A name
// containing '}' outside a valid hash tag cannot be wrapped in a {hash tag} and is rejected;
// the idempotent list sink uses the same rule for its list.

// hashTag returns the hash tag Redis uses for key, and whether key has one: the text between
// the first '{' and the first '}' after it, when that text is non-empty.
func hashTag(key string) (string, bool) { return keyslot.HashTag(key) }

// checkName validates a topic, stream or list name: non-empty, and wrappable in a hash tag.
func checkName(what, name string) error {
	if err := streamwire.CheckName(what, name); err != nil {
		return errInvalid("%v", err)
	}
	return nil
}

// streamName returns the Redis stream key of topic under cfg (streamwire.StreamName). It
// returns an error wrapping redstream.ErrInvalidConfig for an empty topic or one containing
// '}' outside a {hash tag}.
func streamName(cfg Config, topic string) (string, error) {
	if err := checkName("topic", topic); err != nil {
		return "", err
	}
	return streamwire.StreamName(topic, cfg.EnvIsolation, cfg.Env), nil
}

func pid() int { return os.Getpid() }

// partitionCount returns the number of streams of topic under cfg: Config.Partitions[topic],
// 1 when it is 0 or 1 (or absent).
func partitionCount(cfg Config, topic string) int {
	return max(cfg.Partitions[topic], 1)
}

// PartitionStreams returns the Redis stream keys of topic under cfg, partition i at index i:
// the topic's one stream for an unpartitioned topic (Config.Partitions[topic] 0 or 1), else
// the partition names of the wire contract (WIRE.md, "Partitions"), which
// testdata/partitions.json pins. It returns an error wrapping redstream.ErrInvalidConfig for a
// bad topic name, a partition count out of range, or a partitioned topic whose name has a
// hash tag (the tag would pin every partition to one slot).
func PartitionStreams(cfg Config, topic string) ([]string, error) {
	s, err := streamName(cfg, topic)
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
		out[i] = streamwire.PartitionName(s, i, n)
	}
	return out, nil
}

// topicStreams returns every stream of topic under cfg: its partitions (PartitionStreams),
// or for a topic with priority levels (Config.Priorities) its levels' streams, level p at
// index p, and whether they are levels.
func topicStreams(cfg Config, topic string) ([]string, bool, error) {
	streams, err := PartitionStreams(cfg, topic)
	if err != nil {
		return nil, false, err
	}
	n := cfg.Priorities[topic]
	if n <= 1 || len(streams) > 1 {
		return streams, false, nil
	}
	if n > streamwire.MaxPriorities {
		return nil, false, errInvalid("topic %q: %d priority levels: want 0 to %d", topic, n, streamwire.MaxPriorities)
	}
	out := make([]string, n)
	for p := range out {
		out[p] = streamwire.PriorityName(streams[0], p)
	}
	return out, true, nil
}

// checkPartitions validates a partition count.
func checkPartitions(topic string, n int) error {
	if n < 0 || n > streamwire.MaxPartitions {
		return errInvalid("topic %q: %d partitions: want 0 to %d (0 or 1: one stream)", topic, n, streamwire.MaxPartitions)
	}
	return nil
}
