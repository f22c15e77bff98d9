package idempotency

import (
	_ "embed"

	"github.com/redis/rueidis"
)

// The Redis engine's scripts, one per file in scripts/, each headed by its KEYS, ARGV and
// reply. Every script touches one key, the record of one idempotency key.
var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/complete.lua
	completeSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/renew.lua
	renewSrc string

	scriptAcquire  = rueidis.NewLuaScript(acquireSrc)
	scriptComplete = rueidis.NewLuaScript(completeSrc)
	scriptRelease  = rueidis.NewLuaScript(releaseSrc)
	scriptRenew    = rueidis.NewLuaScript(renewSrc)
)
