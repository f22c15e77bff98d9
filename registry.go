package redstream

import (
	"fmt"
	"iter"
	"slices"
)

// Registry looks limiters up by name. It is immutable after [NewRegistry] (which copies the
// map it is given), so it is safe for concurrent use without locking.
type Registry struct {
	m     map[string]Limiter
	names []string // sorted
}

// NewRegistry returns a registry of a copy of limiters: later changes to the map do not
// affect the registry. It returns an error wrapping ErrInvalidConfig for an empty name or a
// nil limiter. An empty or nil map gives an empty registry.
func NewRegistry(limiters map[string]Limiter) (*Registry, error) {
	r := &Registry{m: make(map[string]Limiter, len(limiters)), names: make([]string, 0, len(limiters))}
	for name, l := range limiters {
		if name == "" {
			return nil, fmt.Errorf("redstream: NewRegistry: %w: empty name", ErrInvalidConfig)
		}
		if l == nil {
			return nil, fmt.Errorf("redstream: NewRegistry: %w: nil limiter for %q", ErrInvalidConfig, name)
		}
		r.m[name] = l
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	return r, nil
}

// Get returns the limiter registered under name, or an error wrapping ErrNotFound.
func (r *Registry) Get(name string) (Limiter, error) {
	if r != nil {
		if l, ok := r.m[name]; ok {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: limiter %q", ErrNotFound, name)
}

// Len returns the number of registered limiters.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.names)
}

// Names returns the registered names in ascending order, in a new slice.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.names)
}

// All yields every registered name and limiter in ascending order of name. It is a read-only
// view: the registry cannot be changed through it.
func (r *Registry) All() iter.Seq2[string, Limiter] {
	return func(yield func(string, Limiter) bool) {
		if r == nil {
			return
		}
		for _, n := range r.names {
			if !yield(n, r.m[n]) {
				return
			}
		}
	}
}
