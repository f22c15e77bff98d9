package stream

import (
	_ "embed"

	"github.com/redis/rueidis"
)

// Script of idempotent sends on servers without XADD IDMP (sendid.go).
var (
	//go:embed scripts/xadd_idem.lua
	xaddIdemLua    string
	xaddIdemScript = rueidis.NewLuaScript(xaddIdemLua)
	// xaddIdemCompact is xadd_idem.lua without its comment lines: the text SendBatch sends
	// with each EVAL.
	xaddIdemCompact = compactLua(xaddIdemLua)
)

// Script of unique sends (unique.go).
var (
	//go:embed scripts/xadd_unique.lua
	xaddUniqueLua    string
	xaddUniqueScript = rueidis.NewLuaScript(xaddUniqueLua)
)
