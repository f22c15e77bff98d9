// Package wasmabi is the single definition of the WebAssembly ABI of redstream's core: the
// export names, status codes and result slots shared by the guest (wasmcore/internal/wasmguest), the
// host (package wasmcore) and the test-vector generator, plus a native implementation of
// every export on package core.
//
// The guest is a thin wrapper over the functions here, so the native functions compute
// exactly what the module computes; the test vectors are produced by running them natively.
// The ABI is written down for embedders in wasmcore/ABI.md; keep the two in step.
package wasmabi

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/corekit"
	"github.com/redstream-go/redstream/internal/coreops"
)

// Version is the ABI version returned by the redstream_abi_version export. It changes
// whenever an export's name, arguments, results or status codes change.
const Version = 2

// Status is the value every step export returns: StatusOK or an error code.
type Status = int32

// Status codes.
const (
	// StatusOK means the results slots hold the answer.
	StatusOK Status = 0
	// StatusInvalidConfig means a parameter (capacity, rate, window, limit, ...) is out of
	// range: core's constructor rejected it (ErrInvalidConfig).
	StatusInvalidConfig Status = 1
	// StatusInvalidCost means n <= 0 (ErrInvalidCost).
	StatusInvalidCost Status = 2
	// StatusCostTooLarge means n exceeds the limit (ErrCostTooLarge).
	StatusCostTooLarge Status = 3
	// StatusInvalidTime means now is outside [0, core.MaxTime] (ErrInvalidTime).
	StatusInvalidTime Status = 4
	// StatusInvalidState means the state passed in cannot have been produced by the
	// algorithm (a negative count, an unsorted or too long log, ...).
	StatusInvalidState Status = 5
	// StatusBuffer means a length is negative or larger than the scratch buffer.
	StatusBuffer Status = 6
	// StatusInternal is reserved for an unexpected failure inside the guest (a bug; today
	// a bug makes the call trap instead). The embedder should discard the instance.
	StatusInternal Status = 7
)

// StatusName returns the status code's name as written in ABI.md.
func StatusName(s Status) string {
	switch s {
	case StatusOK:
		return "OK"
	case StatusInvalidConfig:
		return "INVALID_CONFIG"
	case StatusInvalidCost:
		return "INVALID_COST"
	case StatusCostTooLarge:
		return "COST_TOO_LARGE"
	case StatusInvalidTime:
		return "INVALID_TIME"
	case StatusInvalidState:
		return "INVALID_STATE"
	case StatusBuffer:
		return "BUFFER"
	case StatusInternal:
		return "INTERNAL"
	}
	return "UNKNOWN"
}

// Err returns the core sentinel error of a status (nil for StatusOK and for the statuses
// that have no core sentinel).
func Err(s Status) error {
	switch s {
	case StatusInvalidConfig:
		return core.ErrInvalidConfig
	case StatusInvalidCost:
		return core.ErrInvalidCost
	case StatusCostTooLarge:
		return core.ErrCostTooLarge
	case StatusInvalidTime:
		return core.ErrInvalidTime
	}
	return nil
}

// statusOf maps a core error to its status code.
func statusOf(err error) Status {
	switch {
	case err == nil:
		return StatusOK
	case errors.Is(err, core.ErrInvalidConfig):
		return StatusInvalidConfig
	case errors.Is(err, core.ErrInvalidCost):
		return StatusInvalidCost
	case errors.Is(err, core.ErrCostTooLarge):
		return StatusCostTooLarge
	case errors.Is(err, core.ErrInvalidTime):
		return StatusInvalidTime
	}
	return StatusInternal
}

// NumSlots is the number of int64 slots of the results area.
const NumSlots = 16

// Results is the results area: NumSlots little-endian int64 values in guest memory.
type Results [NumSlots]int64

// Result slots of the limiter steps: the decision, then the state to store.
const (
	SlotAllowed    = 0 // 1 if admitted, else 0
	SlotLimit      = 1
	SlotRemaining  = 2
	SlotRetryAfter = 3 // µs
	SlotResetAfter = 4 // µs
	SlotDelay      = 5 // µs
	SlotState0     = 6 // first state slot
	SlotState1     = 7
	SlotState2     = 8
)

// Limits of the ABI.
const (
	// MaxBuffer is the largest scratch buffer redstream_buffer grants: 256 MiB.
	MaxBuffer = 1 << 28
	// MaxLog is the longest sliding-window log the scratch buffer holds (MaxBuffer / 8
	// entries); core.MaxLogLimit, the largest limit, is far below it.
	MaxLog = MaxBuffer / 8
	// MaxBloomK is the largest number of hash functions bloom_positions accepts. NewBloom
	// produces at most 40 (at its smallest false-positive rate, core.MinFPRate).
	MaxBloomK = 4096
	// MaxBloomShards is the largest number of Bloom shards (as in core.NewBloom).
	MaxBloomShards = 1 << 16
)

// Export names, in the order of the Exports table.
const (
	ExportABIVersion         = "redstream_abi_version"
	ExportResults            = "redstream_results"
	ExportBuffer             = "redstream_buffer"
	ExportLimitParams        = "redstream_limit_params"
	ExportLimitStep          = "redstream_limit_step"
	ExportLimitIdle          = "redstream_limit_idle"
	ExportWindowDedupCheck   = "redstream_window_dedup_check"
	ExportWindowDedupExpired = "redstream_window_dedup_expired"
	ExportBloomParams        = "redstream_bloom_params"
	ExportBloomPositions     = "redstream_bloom_positions"
	ExportBloomEstimate      = "redstream_bloom_estimate_count"
	ExportMurmur3            = "redstream_murmur3_x64_128"
	ExportBackoffBase        = "redstream_backoff_base"
	ExportBackoffDelay       = "redstream_backoff_delay"
	ExportLimitCharge        = "redstream_limit_charge"
	ExportLimitSettle        = "redstream_limit_settle"
	ExportLeaseRelease       = "redstream_lease_release"
	ExportLeaseExtend        = "redstream_lease_extend"
	ExportLimitSeed          = "redstream_limit_seed"
)

// ValType is a WebAssembly value type of an export's parameter.
type ValType string

// The value types the ABI uses.
const (
	I32 ValType = "i32"
	I64 ValType = "i64"
	F64 ValType = "f64"
)

// Export describes one exported function: its name, parameter names and types, and how
// many result slots a successful call fills.
type Export struct {
	Name   string
	Params []Param
	// Slots is the number of result slots a StatusOK call fills (0 for the three memory
	// exports, which return their answer directly).
	Slots int
	// Direct reports that the function's return value is the answer, not a status.
	Direct bool
}

// Param is one parameter of an export.
type Param struct {
	Name string
	Type ValType
}

func p(name string, t ValType) Param { return Param{name, t} }

// Exports lists every export of ABI Version, in a fixed order.
var Exports = []Export{
	{Name: ExportABIVersion, Direct: true},
	{Name: ExportResults, Direct: true},
	{Name: ExportBuffer, Params: []Param{p("size", I32)}, Direct: true},
	{Name: ExportLimitParams, Params: limitParams(), Slots: 7},
	{Name: ExportLimitStep, Params: append(limitParams(), p("s0", I64), p("s1", I64), p("s2", I64), p("len", I32), p("now", I64), p("n", I64)), Slots: 9},
	{Name: ExportLimitIdle, Params: append(limitParams(), p("s0", I64), p("s1", I64), p("s2", I64), p("len", I32), p("now", I64)), Slots: 1},
	{Name: ExportWindowDedupCheck, Params: []Param{p("window", I64), p("high", I64), p("last", I64), p("seen", I32), p("now", I64)}, Slots: 2},
	{Name: ExportWindowDedupExpired, Params: []Param{p("window", I64), p("last", I64), p("t", I64)}, Slots: 1},
	{Name: ExportBloomParams, Params: []Param{p("insertions", I64), p("fp_rate", F64), p("shards", I32)}, Slots: 4},
	{Name: ExportBloomPositions, Params: []Param{p("k", I32), p("shard_bits", I64), p("shards", I32), p("len", I32)}, Slots: 1},
	{Name: ExportBloomEstimate, Params: []Param{p("k", I32), p("shard_bits", I64), p("ones", I64)}, Slots: 1},
	{Name: ExportMurmur3, Params: []Param{p("len", I32), p("seed", I32)}, Slots: 2},
	{Name: ExportBackoffBase, Params: []Param{p("initial", I64), p("max", I64), p("multiplier", F64), p("attempt", I64)}, Slots: 1},
	{Name: ExportBackoffDelay, Params: []Param{p("initial", I64), p("max", I64), p("multiplier", F64), p("jitter", I32), p("attempt", I64), p("prev", I64), p("random", I64)}, Slots: 1},
	{Name: ExportLimitCharge, Params: append(limitParams(), p("now", I64), p("n", I64), p("allowed", I32), p("d_limit", I64), p("remaining", I64), p("retry_after", I64), p("reset_after", I64), p("delay", I64)), Slots: 2},
	{Name: ExportLimitSettle, Params: append(limitParams(), p("s0", I64), p("s1", I64), p("s2", I64), p("len", I32), p("at", I64), p("charged", I64), p("now", I64), p("actual", I64)), Slots: 5},
	{Name: ExportLeaseRelease, Params: append(limitParams(), p("len", I32), p("at", I64), p("now", I64), p("n", I64)), Slots: 2},
	{Name: ExportLeaseExtend, Params: append(limitParams(), p("len", I32), p("at", I64), p("now", I64), p("n", I64)), Slots: 3},
	{Name: ExportLimitSeed, Params: append(append(limitParams(), p("from_alg", I32), p("from_capacity", F64), p("from_rate", F64), p("from_window", I64), p("from_limit", I64)),
		p("s0", I64), p("s1", I64), p("s2", I64), p("now", I64), p("carry", I32)), Slots: 4},
}

// limitParams are the parameters that name a limit in the three limit exports: the index
// of its algorithm in core.Algorithms() and its core.Params.
func limitParams() []Param {
	return []Param{p("alg", I32), p("capacity", F64), p("rate", F64), p("window", I64), p("limit", I64)}
}

// Lookup returns the export named name.
func Lookup(name string) (Export, bool) {
	for _, e := range Exports {
		if e.Name == name {
			return e, true
		}
	}
	return Export{}, false
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// putDecision writes d into slots 0..5.
func putDecision(r *Results, d *core.Decision) {
	r[SlotAllowed] = b2i(d.Allowed)
	r[SlotLimit] = d.Limit
	r[SlotRemaining] = d.Remaining
	r[SlotRetryAfter] = d.RetryAfter
	r[SlotResetAfter] = d.ResetAfter
	r[SlotDelay] = d.Delay
}

// Decision reads the decision of a limiter step from slots 0..5.
func (r *Results) Decision() core.Decision {
	return core.Decision{
		Allowed:    r[SlotAllowed] != 0,
		Limit:      r[SlotLimit],
		Remaining:  r[SlotRemaining],
		RetryAfter: r[SlotRetryAfter],
		ResetAfter: r[SlotResetAfter],
		Delay:      r[SlotDelay],
	}
}

// maxTAT bounds a GCRA state: a TAT never runs more than the tolerance (at most
// core.MaxDuration) ahead of a valid time.
const maxTAT = core.MaxTime + core.MaxDuration

// Result slots of redstream_limit_params.
const (
	SlotInts   = 0 // slots 0..2: coreops.Ints, padded with 0
	SlotMax    = 3 // core.Limit.Max
	SlotPeriod = 4 // core.Limit.Period
	SlotWords  = 5 // core.Algorithm.Words: the state words used, 0 for the log
	SlotShape  = 6 // core.Algorithm.Shape: 1 bucket, 2 window
)

// LimitCache remembers the limit of the last (algorithm, parameters) a limit export was
// given, so that a stream of calls with the same spec validates and converts the
// parameters once. The zero value is empty; a nil *LimitCache disables caching.
type LimitCache struct {
	alg            int32
	capacity, rate uint64 // bit patterns
	window, limit  int64
	row            core.Algorithm
	lim            core.Limit
	ok             bool
}

// get returns the limit of (alg, params) and its registry row, from the cache when it
// holds them; false when alg is no index of core.Algorithms() or the parameters are
// invalid (StatusInvalidConfig).
func (c *LimitCache) get(alg int32, capacity, rate float64, window, limit int64) (core.Algorithm, core.Limit, bool) {
	cb, rb := math.Float64bits(capacity), math.Float64bits(rate)
	if c != nil && c.ok && c.alg == alg && c.capacity == cb && c.rate == rb && c.window == window && c.limit == limit {
		return c.row, c.lim, true
	}
	algs := core.Algorithms()
	if alg < 0 || int(alg) >= len(algs) {
		return core.Algorithm{}, core.Limit{}, false
	}
	row := algs[alg]
	lim, err := row.New(core.Params{Capacity: capacity, Rate: rate, Window: window, Limit: limit})
	if err != nil {
		return core.Algorithm{}, core.Limit{}, false
	}
	if c != nil {
		*c = LimitCache{alg: alg, capacity: cb, rate: rb, window: window, limit: limit, row: row, lim: lim, ok: true}
	}
	return row, lim, true
}

// LimitParams is redstream_limit_params: the limit of algorithm alg (its index in
// core.Algorithms()) with parameters (capacity, rate, window, limit), as core.Algorithm.New
// validates them. Slots 0..2 are its Ints (padded with 0), slot 3 its Max, slot 4 its
// Period, slot 5 the algorithm's state words (0: a log) and slot 6 its shape.
func LimitParams(r *Results, c *LimitCache, alg int32, capacity, rate float64, window, limit int64) Status {
	row, lim, ok := c.get(alg, capacity, rate, window, limit)
	if !ok {
		return StatusInvalidConfig
	}
	r[0], r[1], r[2] = 0, 0, 0
	copy(r[SlotInts:SlotInts+3], coreops.Ints(lim))
	r[SlotMax], r[SlotPeriod] = lim.Max(), lim.Period()
	r[SlotWords], r[SlotShape] = int64(row.Words), int64(row.Shape)
	return StatusOK
}

// state builds the key's core.State from the state arguments: the words (s0, s1, s2; the
// words the algorithm does not use must be 0) or, for a log algorithm, the length
// little-endian int64 timestamps in buf, oldest first (lg is the scratch log it fills).
func state(st *core.State, lg *core.Log, buf []byte, row core.Algorithm, lim core.Limit, s0, s1, s2 int64, length int32) Status {
	*st = core.State{Words: [3]int64{s0, s1, s2}}
	for i, w := range st.Words {
		if w < 0 || w > maxTAT || (i >= row.Words && w != 0) {
			return StatusInvalidState
		}
	}
	if length < 0 || int64(length)*8 > int64(len(buf)) {
		return StatusBuffer
	}
	if row.Words > 0 {
		if length != 0 {
			return StatusInvalidState
		}
		return StatusOK
	}
	if int64(length) > lim.Max() {
		return StatusInvalidState
	}
	lg.Reset()
	for i := 0; i < int(length); i++ {
		if !lg.Append(int64(binary.LittleEndian.Uint64(buf[8*i:]))) {
			return StatusInvalidState
		}
	}
	if length > 0 {
		st.Log = lg
	}
	return StatusOK
}

// LimitStep is redstream_limit_step: coreops.CheckState of the limit (as
// LimitParams) for the key in the state given (see state), at now for cost n. Slots 0..5
// are the decision and slots 6..8 the Next to store when admitted: the state words, or for
// a log the number of oldest entries to drop, the number to append and their timestamp
// (all 0 when denied). It does not write buf; lg is scratch space reused between calls.
func LimitStep(r *Results, c *LimitCache, lg *core.Log, buf []byte, alg int32, capacity, rate float64, window, limit, s0, s1, s2 int64, length int32, now, n int64) Status {
	row, lim, ok := c.get(alg, capacity, rate, window, limit)
	if !ok {
		return StatusInvalidConfig
	}
	var st core.State
	if s := state(&st, lg, buf, row, lim, s0, s1, s2, length); s != StatusOK {
		return s
	}
	var (
		d    core.Decision
		next coreops.Next
	)
	if err := coreops.CheckState(lim, &st, now, n, &d, &next); err != nil {
		return statusOf(err)
	}
	putDecision(r, &d)
	r[SlotState0], r[SlotState1], r[SlotState2] = next[0], next[1], next[2]
	return StatusOK
}

// LimitIdle is redstream_limit_idle: slot 0 is 1 when core.Limit.IdleState reports the key
// in the state given (see state) back to its initial state at now, so that an embedder may
// forget it, else 0.
func LimitIdle(r *Results, c *LimitCache, lg *core.Log, buf []byte, alg int32, capacity, rate float64, window, limit, s0, s1, s2 int64, length int32, now int64) Status {
	row, lim, ok := c.get(alg, capacity, rate, window, limit)
	if !ok {
		return StatusInvalidConfig
	}
	var st core.State
	if s := state(&st, lg, buf, row, lim, s0, s1, s2, length); s != StatusOK {
		return s
	}
	if err := coreops.CheckTime(now); err != nil {
		return statusOf(err)
	}
	r[0] = b2i(lim.IdleState(&st, now))
	return StatusOK
}

// WindowDedupCheck is redstream_window_dedup_check: core.NewWindowDedup(window), then
// t = Effective(high, now) and IsDuplicate(last, seen != 0, t). Slot 0 is 1 for a
// duplicate, slot 1 is t: a write stores t as the element's last-seen time and as the
// deduplicator's new high-water mark.
func WindowDedupCheck(r *Results, window, high, last int64, seen int32, now int64) Status {
	w, err := core.NewWindowDedup(window)
	if err != nil {
		return StatusInvalidConfig
	}
	if high < 0 || high > core.MaxTime || seen < 0 || seen > 1 || (seen == 1 && (last < 0 || last > core.MaxTime)) {
		return StatusInvalidState
	}
	if err := coreops.CheckTime(now); err != nil {
		return StatusInvalidTime
	}
	t := w.Effective(high, now)
	r[0] = b2i(w.IsDuplicate(last, seen == 1, t))
	r[1] = t
	return StatusOK
}

// WindowDedupExpired is redstream_window_dedup_expired: core.NewWindowDedup(window) then
// Expired(last, t). Slot 0 is 1 when the entry may be pruned.
func WindowDedupExpired(r *Results, window, last, t int64) Status {
	w, err := core.NewWindowDedup(window)
	if err != nil {
		return StatusInvalidConfig
	}
	if last < 0 || last > core.MaxTime {
		return StatusInvalidState
	}
	if err := coreops.CheckTime(t); err != nil {
		return StatusInvalidTime
	}
	r[0] = b2i(w.Expired(last, t))
	return StatusOK
}

// BloomParams is redstream_bloom_params: core.NewBloom(insertions, fpRate, shards). Slots
// 0..3 are K, Bits, Shards and ShardBits.
func BloomParams(r *Results, insertions int64, fpRate float64, shards int32) Status {
	b, err := core.NewBloom(insertions, fpRate, int(shards))
	if err != nil {
		return StatusInvalidConfig
	}
	r[0], r[1], r[2], r[3] = int64(b.K), int64(b.Bits), int64(b.Shards), int64(b.ShardBits)
	return StatusOK
}

func bloomOf(k int32, shardBits int64, shards int32) (core.Bloom, bool) {
	if k < 1 || k > MaxBloomK || shardBits < 1 || uint64(shardBits) > core.MaxShardBits ||
		shards < 1 || shards > MaxBloomShards {
		return core.Bloom{}, false
	}
	return core.Bloom{K: int(k), ShardBits: uint64(shardBits), Shards: int(shards)}, true
}

// BloomPositions is redstream_bloom_positions: the element is buf[0:length]; slot 0 is its
// shard and its k positions are written as little-endian uint64 over buf[0:8*k] (after the
// element was read). pos is scratch space reused between calls.
func BloomPositions(r *Results, pos []uint64, buf []byte, k int32, shardBits int64, shards int32, length int32) ([]uint64, Status) {
	b, ok := bloomOf(k, shardBits, shards)
	if !ok {
		return pos, StatusInvalidConfig
	}
	if length < 0 || int(length) > len(buf) || 8*int(k) > len(buf) {
		return pos, StatusBuffer
	}
	shard, pos := b.Locate(buf[:length], pos[:0])
	for i, v := range pos {
		binary.LittleEndian.PutUint64(buf[8*i:], v)
	}
	r[0] = int64(shard)
	return pos, StatusOK
}

// BloomEstimateCount is redstream_bloom_estimate_count: core.Bloom{K: k, ShardBits:
// shardBits}.EstimateCount(ones). Slot 0 is the estimate.
func BloomEstimateCount(r *Results, k int32, shardBits, ones int64) Status {
	b, ok := bloomOf(k, shardBits, 1)
	if !ok {
		return StatusInvalidConfig
	}
	if ones < 0 {
		return StatusInvalidState
	}
	r[0] = b.EstimateCount(uint64(ones))
	return StatusOK
}

// Murmur3 is redstream_murmur3_x64_128 over buf[0:length] with seed (an unsigned 32-bit
// value passed as i32). Slots 0 and 1 are h1 and h2 (as int64 bit patterns).
func Murmur3(r *Results, buf []byte, length, seed int32) Status {
	if length < 0 || int(length) > len(buf) {
		return StatusBuffer
	}
	h1, h2 := corekit.Murmur3x64_128(buf[:length], uint32(seed))
	r[0], r[1] = int64(h1), int64(h2)
	return StatusOK
}

// BackoffBase is redstream_backoff_base: core.NewBackoff(initial, max, multiplier,
// JitterNone) then Base(attempt). Slot 0 is the delay in µs.
func BackoffBase(r *Results, initial, max int64, multiplier float64, attempt int64) Status {
	b, err := core.NewBackoff(initial, max, multiplier, core.JitterNone)
	if err != nil {
		return StatusInvalidConfig
	}
	r[0] = b.Base(attempt)
	return StatusOK
}

// Uniform returns the random draw the backoff steps use for rnd(n): the high 64 bits of
// the 128-bit product random × n, a value in [0, n) for n > 0.
func Uniform(random uint64, n int64) int64 {
	hi, _ := bits.Mul64(random, uint64(n))
	return int64(hi)
}

// BackoffDelay is redstream_backoff_delay: core.NewBackoff(initial, max, multiplier,
// jitter) then Delay(attempt, prev, rnd) with rnd(n) = Uniform(random, n). Slot 0 is the
// delay in µs.
func BackoffDelay(r *Results, initial, max int64, multiplier float64, jitter int32, attempt, prev, random int64) Status {
	b, err := core.NewBackoff(initial, max, multiplier, core.Jitter(jitter))
	if err != nil {
		return StatusInvalidConfig
	}
	r[0] = b.Delay(attempt, prev, func(n int64) int64 { return Uniform(uint64(random), n) })
	return StatusOK
}

// Result slots of redstream_limit_settle.
const (
	SlotChange = 0 // the change applied, in units: negative a refund, positive a charge
	SlotSettle = 1 // slots 1..3: the state words to store
	SlotLogLen = 4 // the log's new length (its entries are in the scratch buffer); 0 for words
)

// LimitCharge is redstream_limit_charge: coreops.ChargeOf of the limit (as LimitParams)
// for a request of cost n admitted at now with the decision given (as a step's slots 0..5
// hold it). Slot 0 is the charge's At, slot 1 its N (0 and 0 for a denied decision).
func LimitCharge(r *Results, c *LimitCache, alg int32, capacity, rate float64, window, limit, now, n int64, allowed int32, dLimit, remaining, retryAfter, resetAfter, delay int64) Status {
	_, lim, ok := c.get(alg, capacity, rate, window, limit)
	if !ok || !coreops.Settles(lim) {
		return StatusInvalidConfig
	}
	if err := coreops.CheckTime(now); err != nil {
		return statusOf(err)
	}
	if n < 1 {
		return StatusInvalidCost
	}
	d := core.Decision{Allowed: allowed == 1, Limit: dLimit, Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter, Delay: delay}
	ch := coreops.ChargeOf(lim, now, n, &d)
	r[0], r[1] = ch.At, ch.N
	return StatusOK
}

// LimitSettle is redstream_limit_settle: coreops.SettleState of the limit (as
// LimitParams) for the key in the state given (see state), settling the charge (at,
// charged) at now with the actual cost. Slot 0 is the change applied; slots 1..3 the state
// words to store; for a log, slot 4 is the new log's length and the new log (oldest first)
// replaces the one in buf, which must hold max(len, the limit's max) entries (else
// StatusBuffer). lg is scratch space reused between calls.
func LimitSettle(r *Results, c *LimitCache, lg *core.Log, buf []byte, alg int32, capacity, rate float64, window, limit, s0, s1, s2 int64, length int32, at, charged, now, actual int64) Status {
	row, lim, ok := c.get(alg, capacity, rate, window, limit)
	if !ok || !coreops.Settles(lim) {
		return StatusInvalidConfig
	}
	var st core.State
	if s := state(&st, lg, buf, row, lim, s0, s1, s2, length); s != StatusOK {
		return s
	}
	if row.Words == 0 && int64(len(buf)) < 8*lim.Max() {
		return StatusBuffer
	}
	if at < 0 || at > maxTAT {
		return StatusInvalidState
	}
	k, err := coreops.SettleState(lim, &st, coreops.Charge{At: at, N: charged}, now, actual)
	if err != nil {
		return statusOf(err)
	}
	r[SlotChange] = k
	r[SlotSettle], r[SlotSettle+1], r[SlotSettle+2] = st.Words[0], st.Words[1], st.Words[2]
	r[SlotLogLen] = 0
	if row.Words == 0 && st.Log != nil {
		n := st.Log.Len()
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(st.Log.At(i)))
		}
		r[SlotLogLen] = int64(n)
	}
	return StatusOK
}

// Result slots of redstream_lease_release and redstream_lease_extend.
const (
	SlotLeaseDone  = 0 // 1 if the lease was released (extended), else 0 (nothing changed)
	SlotReleaseLen = 1 // release: the log's new length (its entries are in the scratch buffer)
	SlotExtendAt   = 1 // extend: the lease's new time (its expiry is this plus the lease TTL)
	SlotExtendLen  = 2 // extend: the log's new length (its entries are in the scratch buffer)
)

// lease builds the log of a concurrency limit (alg and the parameters as LimitParams) from
// the length entries in buf (as state does) and checks the lease's arguments: StatusOK, the
// limit and the key's state, or the status of the first bad argument. A limit of another
// algorithm is StatusInvalidConfig: only a concurrency limit holds leases.
func lease(c *LimitCache, lg *core.Log, buf []byte, alg int32, capacity, rate float64, window, limit int64, length int32, now, n int64) (core.Limit, core.State, Status) {
	row, lim, ok := c.get(alg, capacity, rate, window, limit)
	if !ok || row.Name != "concurrency" {
		return core.Limit{}, core.State{}, StatusInvalidConfig
	}
	var st core.State
	if s := state(&st, lg, buf, row, lim, 0, 0, 0, length); s != StatusOK {
		return core.Limit{}, core.State{}, s
	}
	if err := coreops.CheckTime(now); err != nil {
		return core.Limit{}, core.State{}, statusOf(err)
	}
	if n < 1 {
		return core.Limit{}, core.State{}, StatusInvalidCost
	}
	if n > lim.Max() {
		return core.Limit{}, core.State{}, StatusCostTooLarge
	}
	return lim, st, StatusOK
}

// putLog writes the log of st (oldest first) at the start of buf and returns its length.
// It never writes past the length the log had when read from buf: a lease only removes or
// moves entries.
func putLog(buf []byte, st *core.State) int64 {
	if st.Log == nil {
		return 0
	}
	n := st.Log.Len()
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(st.Log.At(i)))
	}
	return int64(n)
}

// LeaseRelease is redstream_lease_release: coreops.ReleaseLease of the concurrency limit (as
// LimitParams) on the key's log (length entries in buf, as for LimitStep) for a lease of n
// units taken (or last extended) at at, released at now. Slot 0 is 1 when the lease still
// held its units and they are freed, else 0 (an expired or already released lease changes
// nothing); slot 1 is the log's new length, its entries (oldest first) at the start of buf.
// lg is scratch space reused between calls.
func LeaseRelease(r *Results, c *LimitCache, lg *core.Log, buf []byte, alg int32, capacity, rate float64, window, limit int64, length int32, at, now, n int64) Status {
	lim, st, s := lease(c, lg, buf, alg, capacity, rate, window, limit, length, now, n)
	if s != StatusOK {
		return s
	}
	r[SlotLeaseDone] = b2i(coreops.ReleaseLease(lim, &st, at, now, n))
	r[SlotReleaseLen] = putLog(buf, &st)
	return StatusOK
}

// LeaseExtend is redstream_lease_extend: coreops.ExtendLease of the concurrency limit (as
// LimitParams) on the key's log (as for LeaseRelease) for a lease of n units taken (or last
// extended) at at, renewed at now. Slot 0 is 1 when the lease still held its units and is
// renewed, else 0 (the lease is lost; nothing changed); slot 1 is its new time (it expires
// the lease TTL after it), slot 2 the log's new length, its entries at the start of buf.
func LeaseExtend(r *Results, c *LimitCache, lg *core.Log, buf []byte, alg int32, capacity, rate float64, window, limit int64, length int32, at, now, n int64) Status {
	lim, st, s := lease(c, lg, buf, alg, capacity, rate, window, limit, length, now, n)
	if s != StatusOK {
		return s
	}
	eff, ok := coreops.ExtendLease(lim, &st, at, now, n)
	r[SlotLeaseDone], r[SlotExtendAt] = b2i(ok), eff
	r[SlotExtendLen] = putLog(buf, &st)
	return StatusOK
}

// Result slots of redstream_limit_seed.
const (
	SlotSeedKept  = 0 // 1 when the limit did not change: the key keeps its state as it is
	SlotSeedState = 1 // slots 1..3: the seeded state words
)

// LimitSeed is redstream_limit_seed: coreops.SeedState of the limit (as LimitParams)
// from the key's state words (s0, s1, s2) under the previous limit (from_*: another limit
// in the same form) at now by the strategy carry (core.Carry: 0 reset, 1 as-is, 2
// proportional). Slot 0 is 1 when the two limits are the same (coreops.Same): the key
// keeps its state, words or log, as it is; slots 1..3 are the seeded words otherwise (all 0
// for a new key: a reset, a log algorithm, or a pair coreops.CheckCarry refuses). The
// words are checked as the previous limit's state (StatusInvalidState); a strategy outside
// 0..2 is StatusInvalidConfig.
func LimitSeed(r *Results, c *LimitCache, alg int32, capacity, rate float64, window, limit int64, fromAlg int32, fromCapacity, fromRate float64, fromWindow, fromLimit, s0, s1, s2, now int64, carry int32) Status {
	_, lim, ok := c.get(alg, capacity, rate, window, limit)
	if !ok {
		return StatusInvalidConfig
	}
	frow, from, ok := (*LimitCache)(nil).get(fromAlg, fromCapacity, fromRate, fromWindow, fromLimit)
	if !ok || carry < int32(core.CarryReset) || carry > int32(core.CarryProportional) {
		return StatusInvalidConfig
	}
	var (
		old core.State
		lg  core.Log // a log algorithm's state is not passed: its log stays empty
	)
	if s := state(&old, &lg, nil, frow, from, s0, s1, s2, 0); s != StatusOK {
		return s
	}
	if err := coreops.CheckTime(now); err != nil {
		return statusOf(err)
	}
	st := coreops.SeedState(lim, from, old, now, core.Carry(carry))
	r[SlotSeedKept] = b2i(coreops.Same(lim, from))
	r[SlotSeedState], r[SlotSeedState+1], r[SlotSeedState+2] = st.Words[0], st.Words[1], st.Words[2]
	return StatusOK
}
