package core

import "fmt"

// Shape is the parameter shape of an algorithm: which fields of [Params] it reads and what
// its Ints are.
type Shape int

// The parameter shapes.
const (
	// Bucket reads Params.Capacity and Params.Rate (per second); its Ints are the GCRA
	// interval (µs), tolerance (µs) and burst.
	Bucket Shape = iota + 1
	// Window reads Params.Window (µs) and Params.Limit; its Ints are window and limit.
	Window
)

// Params are an algorithm's parameters in user units, as redstream.Spec carries them. An
// algorithm reads the fields of its Shape; the others must be zero.
type Params struct {
	// Capacity is the bucket size (burst), in [1, MaxCount]. Bucket shape.
	Capacity float64
	// Rate is the refill (or leak) rate per second, in (0, 1e6]. Bucket shape.
	Rate float64
	// Window is the window length in µs, in (0, MaxDuration]. Window shape.
	Window int64
	// Limit is the most cost admitted per window, in [1, MaxCount]. Window shape.
	Limit int64
}

// Algorithm is one row of the registry of rate-limiting algorithms ([Algorithms]): every
// runtime is generated from, or checked against, these rows. The fields are read by
// redstream.Spec, the engines' tables, tools/luagen (the dispatch of multi.lua and
// peek.lua), tools/jsgen (the TypeScript tables) and the WebAssembly ABI's generic step.
type Algorithm struct {
	// Name is the algorithm's name in configuration files and redstream.Algorithm.
	Name string
	// Shape is its parameter shape.
	Shape Shape
	// Code is the two-letter code naming it in the ARGV of multi.lua and peek.lua.
	Code string
	// Lua is the Lua function deciding it, defined by lua/src/algo/<Lua>.lua and called
	// as Lua(key, Ints..., LuaArgs...).
	Lua string
	// LuaArgs are constant Lua arguments after the Ints ("true" makes gcra shape the
	// leaky bucket's decisions), or "".
	LuaArgs string
	// Words is how many of State.Words the algorithm uses; 0 means its state is State.Log.
	Words int

	new func(Params) (limiter, error)
}

// registry lists every algorithm, in a fixed order. A new algorithm is one row here and
// its file core/<name>.go (see CONTRIBUTING.md, "Adding a limiter algorithm").
var registry = [...]Algorithm{
	{Name: "token-bucket", Shape: Bucket, Code: "tb", Lua: "gcra", LuaArgs: "false", Words: 1, new: newTokenBucket},
	{Name: "leaky-bucket", Shape: Bucket, Code: "lb", Lua: "gcra", LuaArgs: "true", Words: 1, new: newLeakyBucket},
	{Name: "sliding", Shape: Window, Code: "sl", Lua: "sliding_log", Words: 0, new: newSlidingLog},
	{Name: "sliding-counter", Shape: Window, Code: "sc", Lua: "sliding_counter", Words: 3, new: newSlidingCounter},
	{Name: "fixed", Shape: Window, Code: "fw", Lua: "fixed_window", Words: 2, new: newFixedWindow},
	// The concurrency limit's Window is the lease TTL; its Lua takes the lease token from
	// the padded third parameter (0: a lease nobody releases).
	{Name: "concurrency", Shape: Window, Code: "cc", Lua: "concurrency", LuaArgs: "p3", Words: 0, new: newConcurrency},
}

// Algorithms returns every algorithm of the registry, in a fixed order, in a new slice.
func Algorithms() []Algorithm { return append([]Algorithm(nil), registry[:]...) }

// Lookup returns the algorithm named name, or an error wrapping ErrInvalidConfig.
func Lookup(name string) (Algorithm, error) {
	for i := range registry {
		if registry[i].Name == name {
			return registry[i], nil
		}
	}
	return Algorithm{}, fmt.Errorf("%w: unknown algorithm %q", ErrInvalidConfig, name)
}

// New validates p and returns the limit: the algorithm reads the fields of its Shape
// (the others are ignored) and its idle rule, steps and Ints are those of
// core/<algorithm>.go. Errors wrap ErrInvalidConfig and name the bad parameter; an
// Algorithm that is not a row of the registry is an error too.
func (a Algorithm) New(p Params) (Limit, error) {
	for i := range registry {
		row := &registry[i]
		if row.Name != a.Name {
			continue
		}
		if row.Shape == Bucket {
			p.Window, p.Limit = 0, 0
		} else {
			p.Capacity, p.Rate = 0, 0
		}
		l, err := row.new(p)
		if err != nil {
			return Limit{}, err
		}
		return Limit{alg: row, l: l}, nil
	}
	return Limit{}, fmt.Errorf("%w: unknown algorithm %q", ErrInvalidConfig, a.Name)
}
