package stream

import (
	_ "embed"

	"github.com/redis/rueidis"
)

// The package's Lua scripts, one per file in scripts/, each headed by its KEYS, ARGV and
// reply contract. Every script's keys share one hash tag (see keys.go), so they are
// cluster-safe.
var (
	//go:embed scripts/deadletter.lua
	deadLetterLua string
	//go:embed scripts/replay.lua
	replayLua string
	//go:embed scripts/reclaim.lua
	reclaimLua string
	//go:embed scripts/trim_safe.lua
	trimSafeLua string
	//go:embed scripts/sink_write.lua
	sinkWriteLua string
	//go:embed scripts/dlq_mark.lua
	dlqMarkLua string
	//go:embed scripts/dlq_move.lua
	dlqMoveLua string
	//go:embed scripts/dlq_replay.lua
	dlqReplayLua string
	//go:embed scripts/dlq_last.lua
	dlqLastLua string

	deadLetterScript = rueidis.NewLuaScript(deadLetterLua)
	replayScript     = rueidis.NewLuaScript(replayLua)
	reclaimScript    = rueidis.NewLuaScript(reclaimLua)
	trimSafeScript   = rueidis.NewLuaScript(trimSafeLua)
	sinkWriteScript  = rueidis.NewLuaScript(sinkWriteLua)
	dlqLastScript    = rueidis.NewLuaScript(dlqLastLua)
)

// Scripts of the consumer's leases, retries and housekeeping.
var (
	//go:embed scripts/lease.lua
	leaseLua string
	//go:embed scripts/redeliver.lua
	redeliverLua string
	//go:embed scripts/leave.lua
	leaveLua string
	//go:embed scripts/reap.lua
	reapLua string
	//go:embed scripts/lag.lua
	lagLua string
	//go:embed scripts/park.lua
	parkLua string

	leaseScript     = rueidis.NewLuaScript(leaseLua)
	redeliverScript = rueidis.NewLuaScript(redeliverLua)
	leaveScript     = rueidis.NewLuaScript(leaveLua)
	reapScript      = rueidis.NewLuaScript(reapLua)
	lagScript       = rueidis.NewLuaScript(lagLua)
	parkScript      = rueidis.NewLuaScript(parkLua)
)

// Scripts of delayed delivery (delay.go).
var (
	//go:embed scripts/delay_add.lua
	delayAddLua string
	//go:embed scripts/delay_move.lua
	delayMoveLua string
	//go:embed scripts/delay_cancel.lua
	delayCancelLua string

	delayAddScript    = rueidis.NewLuaScript(delayAddLua)
	delayMoveScript   = rueidis.NewLuaScript(delayMoveLua)
	delayCancelScript = rueidis.NewLuaScript(delayCancelLua)
)

// Scripts of fenced deliveries (ack.go, fence.go): the batched acknowledgement (with
// Handler.DeleteOnAck) and the claims that hand entries out with their delivery count.
var (
	//go:embed scripts/ack.lua
	ackLua string
	//go:embed scripts/claim.lua
	claimLua string

	ackScript   = rueidis.NewLuaScript(ackLua)
	claimScript = rueidis.NewLuaScript(claimLua)
)

// Scripts of partition ownership (owner.go).
var (
	//go:embed scripts/owner_renew.lua
	ownerRenewLua string
	//go:embed scripts/owner_release.lua
	ownerReleaseLua string
	//go:embed scripts/members_beat.lua
	membersBeatLua string

	ownerRenewScript   = rueidis.NewLuaScript(ownerRenewLua)
	ownerReleaseScript = rueidis.NewLuaScript(ownerReleaseLua)
	membersBeatScript  = rueidis.NewLuaScript(membersBeatLua)
)
