package cache

import (
	_ "embed"

	"github.com/redis/rueidis"
)

// The Lua scripts, one per file in scripts/, each headed by its KEYS/ARGV/reply contract.
// Each touches exactly one key. They are wrapped once, here: rueidis runs them with EVALSHA
// and falls back to EVAL on NOSCRIPT.
var (
	//go:embed scripts/acquire.lua
	acquireLua string
	//go:embed scripts/fill.lua
	fillLua string
	//go:embed scripts/unlock.lua
	unlockLua string
	//go:embed scripts/expire.lua
	expireLua string
	//go:embed scripts/get_renew.lua
	getRenewLua string
	//go:embed scripts/refresh.lua
	refreshLua string

	acquireScript  = rueidis.NewLuaScript(acquireLua)
	fillScript     = rueidis.NewLuaScript(fillLua)
	unlockScript   = rueidis.NewLuaScript(unlockLua)
	expireScript   = rueidis.NewLuaScript(expireLua)
	getRenewScript = rueidis.NewLuaScript(getRenewLua)
	refreshScript  = rueidis.NewLuaScript(refreshLua)
)
