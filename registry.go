package redstream

import (
	"fmt"
	"slices"
)

// Registry looks limiters up by name. It is immutable after [NewRegistry] (which copies the
// map it is given), so it is safe for concurrent use without locking.
type Registry struct {
	m     map[string]Limiter
	names []string // sorted
}

// NewRegistry returns a registry of a copy of limiters: later changes to the map do not
// affect the registry. It returns an error wrapping ErrInvalidConfig for an empty name, a
// nil limiter, or two limiters counted under one metrics name (metrics.Named, found
// through Unwrap), whose counters would mix. An empty or nil map gives an empty registry.
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
	counted := map[string]string{} // metrics name -> registry name, in name order
	for _, name := range r.names {
		m, ok := metricsName(r.m[name])
		if !ok {
			continue
		}
		if prev, dup := counted[m]; dup {
			return nil, fmt.Errorf("redstream: NewRegistry: %w: limiters %q and %q are both counted as %q (metrics.Named); give each its own name",
				ErrInvalidConfig, prev, name, m)
		}
		counted[m] = name
	}
	return r, nil
}

// metricsName returns the name l, or a limiter it wraps, counts its decisions under
// (metrics.Named's), looking through Unwrap.
func metricsName(l Limiter) (string, bool) {
	for depth := 0; l != nil && depth < 16; depth++ {
		if n, ok := l.(interface{ Name() string }); ok {
			return n.Name(), true
		}
		u, ok := l.(interface{ Unwrap() Limiter })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	return "", false
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

// Names returns the registered names in ascending order, in a new slice.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.names)
}
