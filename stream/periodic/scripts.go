package periodic

import (
	_ "embed"

	"github.com/redis/rueidis"
)

// The package's Lua scripts, one per file in scripts/, each headed by its KEYS, ARGV and
// reply contract. Each script's keys share the topic's hash tag, so they are cluster-safe.
var (
	//go:embed scripts/fire.lua
	fireLua string
	//go:embed scripts/admin.lua
	adminLua string

	fireScript  = rueidis.NewLuaScript(fireLua)
	adminScript = rueidis.NewLuaScript(adminLua)
)

// Metric families of the package (metrics/families.go and docs/metrics.md list them).
const (
	metricSent    = "redis_streaming_periodic_sent_total"
	metricSkipped = "redis_streaming_periodic_skipped_total"
	metricErrors  = "redis_streaming_periodic_errors_total"
)
