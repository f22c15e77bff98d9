package memory

import (
	"context"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/engine"
)

// setDedup is the exact deduplicator: it remembers every element until Clear, in a
// sharded map (one mutex per shard). It has no false positives and no false negatives, and
// its memory grows with the number of distinct elements.
//
// A setDedup is safe for concurrent use; CheckAndMark is atomic, so of several
// goroutines marking the same new element exactly one sees it as new. The empty element is
// never a duplicate and is never recorded. NewDeduplicator builds it.
type setDedup struct {
	t engine.Table[struct{}]
}

var _ redstream.Deduplicator = (*setDedup)(nil)

// newSetDedup returns an empty exact deduplicator. Of opts only Shards is used. It
// returns an error wrapping redstream.ErrInvalidConfig when opts is invalid.
func newSetDedup(opts Options) (*setDedup, error) {
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return &setDedup{t: engine.NewTable[struct{}](r)}, nil
}

// IsDuplicate reports whether element was recorded. It never returns an error.
func (d *setDedup) IsDuplicate(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	s, tag := d.t.Locate(element)
	s.Lock()
	_, ok := s.Find(element, tag)
	s.Unlock()
	return ok, nil
}

// MarkSeen records element. It never returns an error.
func (d *setDedup) MarkSeen(ctx context.Context, element string) error {
	d.CheckAndMark(ctx, element)
	return nil
}

// CheckAndMark records element and reports whether it was recorded before. It never
// returns an error.
func (d *setDedup) CheckAndMark(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	s, tag := d.t.Locate(element)
	s.Lock()
	i, ok := s.Find(element, tag)
	if !ok {
		d.t.Insert(s, i, element, tag, struct{}{}, nil)
	}
	s.Unlock()
	return ok, nil
}

// Clear forgets every element. It never returns an error.
func (d *setDedup) Clear(ctx context.Context) error {
	d.t.Clear()
	return nil
}

// UniqueCount returns the exact number of distinct elements recorded since the last Clear.
// It never returns an error.
func (d *setDedup) UniqueCount(ctx context.Context) (int64, error) {
	return int64(d.t.Len()), nil
}
