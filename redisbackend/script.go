package redisbackend

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
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
}

func newScript(name, src string, readOnly bool) *script {
	sum := sha1.Sum([]byte(src))
	s := &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), ro: readOnly}
	if readOnly {
		s.lua = rueidis.NewLuaScriptReadOnly(src)
		s.rw = rueidis.NewLuaScript(src)
	} else {
		s.lua = rueidis.NewLuaScript(src)
	}
	return s
}

var (
	scriptGCRA             = newScript("gcra.lua", lua.GCRA, false)
	scriptSlidingLog       = newScript("sliding_log.lua", lua.SlidingLog, false)
	scriptSlidingCounter   = newScript("sliding_counter.lua", lua.SlidingCounter, false)
	scriptFixedWindow      = newScript("fixed_window.lua", lua.FixedWindow, false)
	scriptMulti            = newScript("multi.lua", lua.Multi, false)
	scriptDedupWindow      = newScript("dedup_window.lua", lua.DedupWindow, false)
	scriptDedupWindowCheck = newScript("dedup_window_check.lua", lua.DedupWindowCheck, true)
	scriptDedupSet         = newScript("dedup_set.lua", lua.DedupSet, false)
	scriptBloomAdd         = newScript("bloom_add.lua", lua.BloomAdd, false)
	scriptBloomExists      = newScript("bloom_exists.lua", lua.BloomExists, true)
	scriptBloomCount       = newScript("bloom_count.lua", lua.BloomCount, true)
)

// algScript is how one algorithm (core.Limit.Name) runs on Redis: the default key prefix
// of its single-limit limiter, its script, its code in multi.lua, and the ARGV its script
// takes after the expiry margin (gcra.lua's ARGV[7]: whether decisions carry the leaky
// bucket's shaping delay). A new algorithm adds one row.
type algScript struct {
	prefix string
	script *script
	code   string
	extra  []string
}

var algScripts = map[string]algScript{
	"token-bucket":    {DefaultTokenBucketPrefix, scriptGCRA, "tb", []string{"0"}},
	"leaky-bucket":    {DefaultLeakyBucketPrefix, scriptGCRA, "lb", []string{"1"}},
	"sliding":         {DefaultSlidingWindowPrefix, scriptSlidingLog, "sl", nil},
	"sliding-counter": {DefaultSlidingCounterPrefix, scriptSlidingCounter, "sc", nil},
	"fixed":           {DefaultFixedWindowPrefix, scriptFixedWindow, "fw", nil},
}

// scriptFor returns the script of algorithm a.
func scriptFor(a redstream.Algorithm) *script { return algScripts[string(a)].script }

// exec runs the script once. keys must share one hash tag (the key schema guarantees it).
// A read-only script that a server refuses to run read-only (miniredis counts TIME as a
// write command; Redis 6.2 has no EVALSHA_RO) is run again with EVALSHA.
func (s *script) exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	r := s.lua.Exec(ctx, c, keys, args)
	if s.rw != nil && refusedReadOnly(r.Error()) {
		r = s.rw.Exec(ctx, c, keys, args)
	}
	return r
}

// refusedReadOnly reports the error of a server that refused a read-only script: one that
// counts a command of it as a write (miniredis, for TIME), or one without EVALSHA_RO
// (Redis 6.2 and older compatible servers).
func refusedReadOnly(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := strings.ToLower(e.Error())
	return strings.Contains(msg, "write commands are not allowed in read-only scripts") ||
		strings.Contains(msg, "unknown command") && strings.Contains(msg, "evalsha_ro")
}

// cmd builds the EVALSHA (or EVALSHA_RO) command of one call.
func (s *script) cmd(c rueidis.Client, keys, args []string) rueidis.Completed {
	if s.ro {
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
// means the script did not run, so the repeat cannot apply a call twice.
func (s *script) execMulti(ctx context.Context, c rueidis.Client, calls []rueidis.LuaExec) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	for i, e := range calls {
		cmds[i] = s.cmd(c, e.Keys, e.Args)
	}
	res := c.DoMulti(ctx, cmds...)
	var retry []int
	for i, r := range res {
		if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() || s.ro && refusedReadOnly(r.Error()) {
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 {
		return res
	}
	again := make(rueidis.Commands, len(retry))
	for j, i := range retry {
		again[j] = s.evalCmd(c, calls[i].Keys, calls[i].Args, refusedReadOnly(res[i].Error()))
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
