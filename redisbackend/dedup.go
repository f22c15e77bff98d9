package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
)

// DedupOptions configures a deduplicator. The zero value is valid.
type DedupOptions struct {
	// KeyPrefix starts every Redis key of the deduplicator: "<KeyPrefix>:{<name>}:<role>".
	// Blank selects DefaultDedupPrefix. It may not contain '{' or '}'.
	KeyPrefix string
	// SetTTL, for the set strategy only, expires the whole set this long after its last
	// write (rounded up to whole milliseconds). Zero, the default, keeps the set until
	// Clear, as the Java starter does.
	SetTTL time.Duration

	// JavaCompatible makes the set deduplicator use the Java implementation's key, the
	// bare name (a set of the elements, SADD), so that Go and Java processes deduplicate
	// together; KeyPrefix must then be blank. The windowed and Bloom deduplicators have no
	// shared Java layout: JavaCompatible is an error wrapping redstream.ErrInvalidConfig
	// for them. Default false: "<KeyPrefix>:{<name>}:set", never the Java key.
	JavaCompatible bool
}

// NewDeduplicator returns the deduplicator of spec.Strategy named name (the Java starter's factory):
// a *SetDeduplicator, a *BloomDeduplicator (default 1,000,000 expected insertions at a 3%
// false-positive rate) or a *WindowDeduplicator (default window one hour). Zero fields of
// spec take redstream's defaults; an unknown strategy or bad parameters are errors wrapping
// redstream.ErrInvalidConfig. Deduplicators with the same prefix, name and strategy share
// their state, across processes. The client stays the caller's.
func NewDeduplicator(client rueidis.Client, name string, spec redstream.DedupSpec, opts DedupOptions) (redstream.Deduplicator, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("redisbackend: %w", err)
	}
	switch spec.Strategy {
	case redstream.DedupSet:
		return NewSetDeduplicator(client, name, opts)
	case redstream.DedupBloom:
		return NewBloomDeduplicator(client, name, spec, opts)
	}
	return NewWindowDeduplicator(client, name, spec.WithDefaults().Window, opts)
}

// dedupBase holds what every deduplicator needs.
type dedupBase struct {
	client rueidis.Client
	name   string
	prefix string
}

func newDedupBase(client rueidis.Client, name string, opts DedupOptions) (dedupBase, error) {
	if client == nil {
		return dedupBase{}, fmt.Errorf("redisbackend: %w: nil client", errInvalidConfig)
	}
	if name == "" {
		return dedupBase{}, fmt.Errorf("redisbackend: %w: empty deduplicator name", errInvalidConfig)
	}
	prefix := DefaultDedupPrefix
	if !isBlank(opts.KeyPrefix) {
		prefix = opts.KeyPrefix
	}
	if err := checkPrefix(prefix); err != nil {
		return dedupBase{}, err
	}
	if err := checkSize("deduplicator name", len(name)+len(prefix)); err != nil {
		return dedupBase{}, err
	}
	return dedupBase{client: client, name: name, prefix: prefix}, nil
}

// checkElement validates a non-empty element stored in Redis.
func checkElement(e string) error { return checkSize("element", len(e)) }

// SetDeduplicator is the exact deduplicator: a Redis set of every element seen (SADD, so
// check-and-mark is atomic across processes), kept until Clear or, with
// DedupOptions.SetTTL, until SetTTL after the last write. Memory grows with the number of
// distinct elements. It is safe for concurrent use.
type SetDeduplicator struct {
	dedupBase
	key string
	ttl string // ms, "0" for none
}

var _ redstream.Deduplicator = (*SetDeduplicator)(nil)

// NewSetDeduplicator returns the set deduplicator named name. The client stays the caller's.
func NewSetDeduplicator(client rueidis.Client, name string, opts DedupOptions) (*SetDeduplicator, error) {
	b, err := newDedupBase(client, name, opts)
	if err != nil {
		return nil, err
	}
	if opts.SetTTL < 0 {
		return nil, fmt.Errorf("redisbackend: %w: SetTTL = %v, want >= 0", errInvalidConfig, opts.SetTTL)
	}
	ms := (opts.SetTTL + time.Millisecond - 1) / time.Millisecond
	key := redisKey(b.prefix, name, roleSet)
	if opts.JavaCompatible {
		if key, err = javaDedupKey(name, redstream.DedupSet, opts); err != nil {
			return nil, err
		}
	}
	return &SetDeduplicator{dedupBase: b, key: key, ttl: strconv.FormatInt(int64(ms), 10)}, nil
}

// Key returns the Redis key of the set.
func (d *SetDeduplicator) Key() string { return d.key }

// IsDuplicate reports whether element was recorded (SISMEMBER). The empty element never is.
func (d *SetDeduplicator) IsDuplicate(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	if err := checkElement(element); err != nil {
		return false, err
	}
	ok, err := d.client.Do(ctx, d.client.B().Sismember().Key(d.key).Member(element).Build()).AsBool()
	if err != nil {
		return false, fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return ok, nil
}

// MarkSeen records element. The empty element is never recorded.
func (d *SetDeduplicator) MarkSeen(ctx context.Context, element string) error {
	_, err := d.CheckAndMark(ctx, element)
	return err
}

// CheckAndMark records element and reports whether it was already recorded; across
// processes exactly one caller sees a new element as new. The empty element is never a
// duplicate and never recorded.
func (d *SetDeduplicator) CheckAndMark(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	dups, err := d.CheckAndMarkBatch(ctx, []string{element})
	if err != nil {
		return false, err
	}
	return dups[0], nil
}

// CheckAndMarkBatch is CheckAndMark of every element, in order, in one script call (so a
// repeated element is a duplicate the second time). Result i is for elements[i].
func (d *SetDeduplicator) CheckAndMarkBatch(ctx context.Context, elements []string) ([]bool, error) {
	out := make([]bool, len(elements))
	args := make([]string, 1, len(elements)+1)
	args[0] = d.ttl
	idx := make([]int, 0, len(elements))
	for i, e := range elements {
		if e == "" {
			continue
		}
		if err := checkElement(e); err != nil {
			return nil, fmt.Errorf("redisbackend: element %d: %w", i, err)
		}
		args = append(args, e)
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return out, nil
	}
	r := scriptDedupSet.exec(ctx, d.client, []string{d.key}, args)
	vs, err := r.AsIntSlice()
	if err == nil && len(vs) != len(idx) {
		err = fmt.Errorf("unexpected reply %v", r)
	}
	if err != nil {
		return nil, scriptDedupSet.wrap(err)
	}
	for j, i := range idx {
		out[i] = vs[j] == 1
	}
	return out, nil
}

// Remove forgets element.
func (d *SetDeduplicator) Remove(ctx context.Context, element string) error {
	if element == "" {
		return nil
	}
	if err := checkElement(element); err != nil {
		return err
	}
	if err := d.client.Do(ctx, d.client.B().Srem().Key(d.key).Member(element).Build()).Error(); err != nil {
		return fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return nil
}

// Clear forgets every element (DEL).
func (d *SetDeduplicator) Clear(ctx context.Context) error {
	if err := d.client.Do(ctx, d.client.B().Del().Key(d.key).Build()).Error(); err != nil {
		return fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return nil
}

// UniqueCount returns the exact number of distinct elements recorded (SCARD).
func (d *SetDeduplicator) UniqueCount(ctx context.Context) (int64, error) {
	n, err := d.client.Do(ctx, d.client.B().Scard().Key(d.key).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return n, nil
}
