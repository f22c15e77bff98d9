package redisbackend

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/lua"
)

// script is one of package lua's scripts, wrapped once in a rueidis.Lua (EVALSHA, falling
// back to EVAL when the server does not know the script yet).
type script struct {
	name string
	src  string
	sha  string // SHA-1 of src in hex: only the script's name for EVALSHA, as Redis defines it
	lua  *rueidis.Lua
	ro   bool
	rw   *rueidis.Lua // for a read-only script, the same script run with EVALSHA
	// algorithms names the algorithms of core's registry the script decides by code
	// (lua.Script.Algorithms: multi.lua and peek.lua).
	algorithms []string
}

// luaScripts is package lua's table of scripts, by name.
var luaScripts = func() map[string]lua.Script {
	m := map[string]lua.Script{}
	for _, s := range lua.Scripts() {
		m[s.Name] = s
	}
	return m
}()

// newScript wraps package lua's script file (e.g. "gcra.lua"), read-only as package lua
// says. The scripts are embedded at build time, so a file package lua lacks is a defect of
// the build: it panics when the package is initialised (TestScripts covers every name).
func newScript(file string) *script {
	ls, ok := luaScripts[strings.TrimSuffix(file, ".lua")]
	if !ok {
		panic("redisbackend: package lua has no script " + file)
	}
	src, readOnly := ls.Source, ls.ReadOnly
	sum := sha1.Sum([]byte(src))
	s := &script{name: file, src: src, sha: hex.EncodeToString(sum[:]), ro: readOnly, algorithms: ls.Algorithms}
	if readOnly {
		s.lua = rueidis.NewLuaScriptReadOnly(src)
		s.rw = rueidis.NewLuaScript(src)
	} else {
		s.lua = rueidis.NewLuaScript(src)
	}
	return s
}

var (
	scriptGCRA             = newScript("gcra.lua")
	scriptSlidingLog       = newScript("sliding_log.lua")
	scriptSlidingCounter   = newScript("sliding_counter.lua")
	scriptFixedWindow      = newScript("fixed_window.lua")
	scriptMulti            = newScript("multi.lua")
	scriptDedupWindow      = newScript("dedup_window.lua")
	scriptDedupWindowCheck = newScript("dedup_window_check.lua")
	scriptDedupSet         = newScript("dedup_set.lua")
	scriptBloomAdd         = newScript("bloom_add.lua")
	scriptBloomExists      = newScript("bloom_exists.lua")
	scriptBloomCount       = newScript("bloom_count.lua")
)

// algScript is how a single-limit limiter of one algorithm (core.Limit.Name) runs on
// Redis: its script, and the ARGV its script takes after the
// expiry margin (gcra.lua's ARGV[7]: whether decisions carry the leaky bucket's shaping
// delay).
type algScript struct {
	script *script
	extra  []string
}

// algScripts is the table of the algorithms that have a single-limit script of their own,
// which decides many keys in one call (AllowBatch). It is optional: an algorithm of core's
// registry it lacks runs on multi.lua with one limit, whose dispatch is generated from the
// registry (see singleScript).
var algScripts = map[string]algScript{
	"token-bucket":    {scriptGCRA, []string{"0"}},
	"leaky-bucket":    {scriptGCRA, []string{"1"}},
	"sliding":         {scriptSlidingLog, nil},
	"sliding-counter": {scriptSlidingCounter, nil},
	"fixed":           {scriptFixedWindow, nil},
}

// codeIn returns the code of the algorithm named name in the ARGV of s (multi.lua or
// peek.lua), or an error wrapping redstream.ErrInvalidConfig when s does not decide it (an
// algorithm of core's registry that package lua was not regenerated for).
func codeIn(s *script, name string) (string, error) {
	a, err := core.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("redisbackend: %w", err)
	}
	if !slices.Contains(s.algorithms, name) {
		return "", fmt.Errorf("redisbackend: %w: %s does not decide algorithm %q (run go generate ./lua/...)", errInvalidConfig, s.name, name)
	}
	return a.Code, nil
}

// singleScript returns how a single-limit limiter of the algorithm named name runs: its
// row of algScripts, or, for an algorithm without a script of its own, multi.lua with one
// limit (multi true). An algorithm no script decides is an error wrapping
// redstream.ErrInvalidConfig.
func singleScript(name string) (as algScript, multi bool, err error) {
	if as, ok := algScripts[name]; ok {
		return as, false, nil
	}
	if _, err := codeIn(scriptMulti, name); err != nil {
		return algScript{}, false, err
	}
	return algScript{script: scriptMulti}, true, nil
}

// scriptFor returns the script a single-limit limiter of algorithm a runs (nil if none).
func scriptFor(a redstream.Algorithm) *script {
	as, _, err := singleScript(string(a))
	if err != nil {
		return nil
	}
	return as.script
}

// exec runs the script once. keys must share one hash tag (the key schema guarantees it).
// A read-only script that a server refuses to run read-only (miniredis counts TIME as a
// write command; Redis 6.2 has no EVALSHA_RO) is run again with EVALSHA, and cp remembers
// the refusal: every later read-only call on that client goes straight to EVALSHA, one
// round trip.
func (s *script) exec(ctx context.Context, c rueidis.Client, cp *caps, keys, args []string) rueidis.RedisResult {
	if s.rw != nil && cp.noRO.Load() {
		return s.rw.Exec(ctx, c, keys, args)
	}
	r := s.lua.Exec(ctx, c, keys, args)
	if s.rw != nil && refusedReadOnly(r.Error()) {
		cp.noRO.Store(true)
		r = s.rw.Exec(ctx, c, keys, args)
	}
	return r
}

// refusedReadOnly reports the error of a server that refused a read-only script: one that
// counts a command of it as a write (miniredis, for TIME), or one without EVALSHA_RO or
// EVAL_RO (Redis 6.2 and older compatible servers, or a server where they are renamed).
func refusedReadOnly(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := strings.ToLower(e.Error())
	return strings.Contains(msg, "write commands are not allowed in read-only scripts") ||
		strings.Contains(msg, "unknown command") && (strings.Contains(msg, "evalsha_ro") || strings.Contains(msg, "eval_ro"))
}

// cmd builds the EVALSHA (or, for a read-only script unless rw, EVALSHA_RO) command of
// one call.
func (s *script) cmd(c rueidis.Client, keys, args []string, rw bool) rueidis.Completed {
	if s.ro && !rw {
		return c.B().EvalshaRo().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// evalCmd builds the EVAL (or EVAL_RO, unless rw) command of one call, sending the
// script's text.
func (s *script) evalCmd(c rueidis.Client, keys, args []string, rw bool) rueidis.Completed {
	if s.ro && !rw {
		return c.B().EvalRo().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	return c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// execMulti runs the script once per call, pipelined in one round trip (DoMulti; a cluster
// client splits it by node). Calls the server does not know the script for (NOSCRIPT, after
// a restart or SCRIPT FLUSH) are repeated once with EVAL, in a second round trip; NOSCRIPT
// means the script did not run, so the repeat cannot apply a call twice. A refused
// read-only call is repeated with EVAL and remembered in cp, as exec does.
func (s *script) execMulti(ctx context.Context, c rueidis.Client, cp *caps, calls []rueidis.LuaExec) []rueidis.RedisResult {
	rw := cp.noRO.Load()
	cmds := make(rueidis.Commands, len(calls))
	for i, e := range calls {
		cmds[i] = s.cmd(c, e.Keys, e.Args, rw)
	}
	res := c.DoMulti(ctx, cmds...)
	var retry []int
	for i, r := range res {
		if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() || s.ro && !rw && refusedReadOnly(r.Error()) {
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 {
		return res
	}
	again := make(rueidis.Commands, len(retry))
	for j, i := range retry {
		refused := s.ro && !rw && refusedReadOnly(res[i].Error())
		if refused {
			cp.noRO.Store(true)
		}
		again[j] = s.evalCmd(c, calls[i].Keys, calls[i].Args, rw || refused)
	}
	for j, r := range c.DoMulti(ctx, again...) {
		res[retry[j]] = r
	}
	return res
}

// wrap names the script in an error.
func (s *script) wrap(err error) error {
	return fmt.Errorf("redisbackend: %s: %w", s.name, classify(err))
}
