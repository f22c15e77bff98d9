package cache

import (
	"reflect"
	"sync"
	"sync/atomic"
)

// memo keeps, per Redis key, the last value decoded from a copy served by client-side
// caching, so a hot hit skips decoding: decoding is most of what a hit costs once the round
// trip is gone. An entry is used only while the copy in memory is byte-for-byte the one it
// was decoded from (same string, usually the same backing array, so the comparison is O(1)),
// and only for types whose values share nothing mutable when copied (shareable): a caller
// mutating its result can never change what another caller gets.
type memo struct {
	m sync.Map // Redis key -> *memoEntry
	n atomic.Int64
}

// maxMemo bounds the entries; past it the memo starts over.
const maxMemo = 8192

type memoEntry struct {
	raw string
	v   any // a T
}

// memoGet returns the value memoized for dk if it was decoded from raw into a T.
func memoGet[T any](m *memo, dk, raw string) (T, bool) {
	if e, ok := m.m.Load(dk); ok {
		e := e.(*memoEntry)
		if e.raw == raw {
			v, ok := e.v.(T)
			return v, ok
		}
	}
	var zero T
	return zero, false
}

// memoPut records v, decoded from raw, for dk when T is shareable.
func memoPut[T any](m *memo, dk, raw string, v T) {
	if !shareable(reflect.TypeFor[T]()) {
		return
	}
	if _, loaded := m.m.Swap(dk, &memoEntry{raw: raw, v: v}); !loaded {
		if m.n.Add(1) > maxMemo {
			m.m.Clear()
			m.n.Store(0)
		}
	}
}

var shareableTypes sync.Map // reflect.Type -> bool

// shareable reports whether copying a value of t copies everything mutable in it: no
// pointers, slices, maps, interfaces, channels or functions (strings are immutable).
func shareable(t reflect.Type) bool {
	if v, ok := shareableTypes.Load(t); ok {
		return v.(bool)
	}
	ok := shareableKind(t, 0)
	shareableTypes.Store(t, ok)
	return ok
}

func shareableKind(t reflect.Type, depth int) bool {
	if depth > 32 {
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return shareableKind(t.Elem(), depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if !shareableKind(t.Field(i).Type, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}
