package lua

// Script describes one embedded script.
type Script struct {
	// Name is the file name without ".lua", e.g. "gcra"; error replies and
	// redisbackend's errors name the script by it.
	Name string
	// Source is the script text.
	Source string
	// ReadOnly reports that the script writes nothing, so it may run with EVALSHA_RO.
	ReadOnly bool
	// Algorithms names the algorithms of core's registry (core.Algorithm.Name) whose limits
	// the script decides by their code: every row for multi.lua and peek.lua, whose dispatch
	// is generated from the registry; nil for the other scripts.
	Algorithms []string
}
