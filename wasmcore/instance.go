package wasmcore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

// fn indexes the step exports an instance calls.
type fn int

const (
	fnBuffer fn = iota
	fnLimitStep
	fnWindowDedupCheck
	fnWindowDedupExpired
	fnBloomParams
	fnBloomPositions
	fnBloomEstimate
	fnMurmur3
	fnBackoffBase
	fnBackoffDelay
	fnLimitCharge
	fnLimitSettle
	fnLeaseRelease
	fnLeaseExtend
	fnLimitSeed
	numFns
)

var fnNames = [numFns]string{
	fnBuffer:             wasmabi.ExportBuffer,
	fnLimitStep:          wasmabi.ExportLimitStep,
	fnWindowDedupCheck:   wasmabi.ExportWindowDedupCheck,
	fnWindowDedupExpired: wasmabi.ExportWindowDedupExpired,
	fnBloomParams:        wasmabi.ExportBloomParams,
	fnBloomPositions:     wasmabi.ExportBloomPositions,
	fnBloomEstimate:      wasmabi.ExportBloomEstimate,
	fnMurmur3:            wasmabi.ExportMurmur3,
	fnBackoffBase:        wasmabi.ExportBackoffBase,
	fnBackoffDelay:       wasmabi.ExportBackoffDelay,
	fnLimitCharge:        wasmabi.ExportLimitCharge,
	fnLimitSettle:        wasmabi.ExportLimitSettle,
	fnLeaseRelease:       wasmabi.ExportLeaseRelease,
	fnLeaseExtend:        wasmabi.ExportLeaseExtend,
	fnLimitSeed:          wasmabi.ExportLimitSeed,
}

// instance is one instantiated module. It is not safe for concurrent use: the pool hands
// it to one goroutine at a time.
type instance struct {
	mod     api.Module
	mem     api.Memory
	fns     [numFns]api.Function
	results uint32 // address of the results area
	buf     uint32 // address of the scratch buffer
	bufLen  uint32 // bytes of the scratch buffer known to be available
	stack   [15]uint64
	// broken is set when a call trapped or the instance misbehaved; release then closes
	// the instance instead of returning it to the pool.
	broken bool
	// slot is the pool slot the instance lives in.
	slot *poolSlot
	// stepper decides a limiter's limits with this instance (its in is this instance).
	stepper stepper
}

// initialBuffer is the scratch buffer size the guest allocates at start (see
// wasmcore/internal/wasmguest).
const initialBuffer = 4096

func (r *Runtime) instantiate(ctx context.Context) (*instance, error) {
	mod, err := r.rt.InstantiateModule(ctx, r.compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
	if err != nil {
		return nil, fmt.Errorf("wasmcore: instantiating the module: %w", err)
	}
	in := &instance{mod: mod, mem: mod.Memory()}
	in.stepper.in = in
	fail := func(format string, args ...any) (*instance, error) {
		mod.Close(ctx)
		return nil, fmt.Errorf("wasmcore: "+format, args...)
	}
	if in.mem == nil {
		return fail("the module exports no memory")
	}
	for i, name := range fnNames {
		if in.fns[i] = mod.ExportedFunction(name); in.fns[i] == nil {
			return fail("the module lacks the export %s", name)
		}
	}
	v, err := mod.ExportedFunction(wasmabi.ExportABIVersion).Call(ctx)
	if err != nil {
		return fail("%s: %w", wasmabi.ExportABIVersion, err)
	}
	if got := int32(v[0]); got != wasmabi.Version {
		return fail("module ABI version %d, want %d", got, wasmabi.Version)
	}
	res, err := mod.ExportedFunction(wasmabi.ExportResults).Call(ctx)
	if err != nil {
		return fail("%s: %w", wasmabi.ExportResults, err)
	}
	in.results = uint32(res[0])
	if _, ok := in.mem.Read(in.results, 8*wasmabi.NumSlots); !ok || in.results%8 != 0 {
		return fail("results area at %#x is outside memory or misaligned", in.results)
	}
	if err := in.ensure(ctx, initialBuffer); err != nil {
		return fail("%v", err)
	}
	return in, nil
}

// ensure makes the scratch buffer at least size bytes long.
func (in *instance) ensure(ctx context.Context, size int) error {
	if size <= int(in.bufLen) {
		return nil
	}
	if size > wasmabi.MaxBuffer {
		return fmt.Errorf("wasmcore: %d bytes exceed the scratch buffer limit of %d", size, wasmabi.MaxBuffer)
	}
	in.stack[0] = api.EncodeI32(int32(size))
	if err := in.fns[fnBuffer].CallWithStack(ctx, in.stack[:]); err != nil {
		in.broken = true
		return fmt.Errorf("%w: %s: %w", ErrTrapped, wasmabi.ExportBuffer, err)
	}
	a := uint32(in.stack[0])
	if _, ok := in.mem.Read(a, uint32(size)); !ok || a == 0 {
		in.broken = true
		return fmt.Errorf("%w: %s(%d) returned %#x", ErrTrapped, wasmabi.ExportBuffer, size, a)
	}
	in.buf, in.bufLen = a, uint32(size)
	return nil
}

// bytes returns a view of the scratch buffer's first n bytes (n <= bufLen). The view is
// valid until the next call into the instance.
func (in *instance) bytes(n int) []byte {
	b, ok := in.mem.Read(in.buf, uint32(n))
	if !ok {
		return nil
	}
	return b
}

// call calls f with the arguments already in in.stack and returns its status. A trap marks
// the instance broken and returns an error wrapping ErrTrapped, as does a status the ABI
// does not define or StatusInternal.
func (in *instance) call(ctx context.Context, f fn) (wasmabi.Status, error) {
	if err := in.fns[f].CallWithStack(ctx, in.stack[:]); err != nil {
		in.broken = true
		return 0, fmt.Errorf("%w: %s: %w", ErrTrapped, fnNames[f], err)
	}
	s := wasmabi.Status(int32(uint32(in.stack[0])))
	if s < wasmabi.StatusOK || s >= wasmabi.StatusInternal {
		in.broken = true
		return s, fmt.Errorf("%w: %s returned status %d (%s)", ErrTrapped, fnNames[f], s, wasmabi.StatusName(s))
	}
	return s, nil
}

// slots returns a view of the results area. It is valid until the next call into the
// instance.
func (in *instance) slots() []byte {
	b, _ := in.mem.Read(in.results, 8*wasmabi.NumSlots)
	return b
}

func slot(b []byte, i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }

func f64(v float64) uint64 { return math.Float64bits(v) }

func i32(v int32) uint64 { return api.EncodeI32(v) }

// readDecision reads the decision of a limiter step into *d. The steps write decisions
// through a pointer (as the kernel's paths do): a core.Decision is too large to be returned
// in registers, and Go copies a returned one through memory.
func readDecision(b []byte, d *core.Decision) {
	d.Allowed = slot(b, wasmabi.SlotAllowed) != 0
	d.Limit = slot(b, wasmabi.SlotLimit)
	d.Remaining = slot(b, wasmabi.SlotRemaining)
	d.RetryAfter = slot(b, wasmabi.SlotRetryAfter)
	d.ResetAfter = slot(b, wasmabi.SlotResetAfter)
	d.Delay = slot(b, wasmabi.SlotDelay)
}

// statusErr converts a non-OK status of a step into the error core returns for the same
// input.
func statusErr(s wasmabi.Status, f fn) error {
	if err := wasmabi.Err(s); err != nil {
		return fmt.Errorf("wasmcore: %w", err)
	}
	return fmt.Errorf("wasmcore: %s: status %d (%s)", fnNames[f], s, wasmabi.StatusName(s))
}

// limitStep calls redstream_limit_step for limit l on the key's state s (its words, or
// its log copied into the scratch buffer, oldest first), writing the decision into *d and
// what CommitState must store into *next.
func (in *instance) limitStep(ctx context.Context, l *abiLimit, s *core.State, now, n int64, d *core.Decision, next *coreops.Next) error {
	entries := 0
	if s.Log != nil {
		entries = s.Log.Len()
	}
	if entries > wasmabi.MaxLog {
		return fmt.Errorf("wasmcore: a log of %d entries exceeds %d", entries, wasmabi.MaxLog)
	}
	if entries > 0 {
		if err := in.ensure(ctx, 8*entries); err != nil {
			return err
		}
		b := in.bytes(8 * entries)
		for i := range entries {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(s.Log.At(i)))
		}
	}
	st := &in.stack
	st[0], st[1], st[2], st[3], st[4] = i32(l.alg), f64(l.p.Capacity), f64(l.p.Rate), uint64(l.p.Window), uint64(l.p.Limit)
	st[5], st[6], st[7], st[8], st[9], st[10] = uint64(s.Words[0]), uint64(s.Words[1]), uint64(s.Words[2]), i32(int32(entries)), uint64(now), uint64(n)
	status, err := in.call(ctx, fnLimitStep)
	if err != nil {
		return err
	}
	if status != wasmabi.StatusOK {
		return statusErr(status, fnLimitStep)
	}
	b := in.slots()
	*next = coreops.Next{slot(b, wasmabi.SlotState0), slot(b, wasmabi.SlotState1), slot(b, wasmabi.SlotState2)}
	if l.log && slot(b, wasmabi.SlotAllowed) != 0 && (next[0] < 0 || next[0] > int64(entries) || next[1] < 0 || next[1] > l.max) {
		in.broken = true
		return fmt.Errorf("%w: %s returned an impossible log change %v", ErrTrapped, fnNames[fnLimitStep], *next)
	}
	readDecision(b, d)
	return nil
}

// limitCharge calls redstream_limit_charge: the charge of the admitted decision d of a
// request of cost n at now (coreops.ChargeOf).
func (in *instance) limitCharge(ctx context.Context, l *abiLimit, now, n int64, d *core.Decision) (coreops.Charge, error) {
	var allowed int32
	if d.Allowed {
		allowed = 1
	}
	st := &in.stack
	st[0], st[1], st[2], st[3], st[4] = i32(l.alg), f64(l.p.Capacity), f64(l.p.Rate), uint64(l.p.Window), uint64(l.p.Limit)
	st[5], st[6], st[7], st[8], st[9] = uint64(now), uint64(n), i32(allowed), uint64(d.Limit), uint64(d.Remaining)
	st[10], st[11], st[12] = uint64(d.RetryAfter), uint64(d.ResetAfter), uint64(d.Delay)
	status, err := in.call(ctx, fnLimitCharge)
	if err != nil {
		return coreops.Charge{}, err
	}
	if status != wasmabi.StatusOK {
		return coreops.Charge{}, statusErr(status, fnLimitCharge)
	}
	b := in.slots()
	return coreops.Charge{At: slot(b, 0), N: slot(b, 1)}, nil
}

// limitSettle calls redstream_limit_settle on the key's state s and stores the result in
// it (coreops.SettleState).
func (in *instance) limitSettle(ctx context.Context, l *abiLimit, s *core.State, c coreops.Charge, now, actual int64) error {
	entries := 0
	if s.Log != nil {
		entries = s.Log.Len()
	}
	if l.log {
		room := max(int64(entries), l.max)
		if room > wasmabi.MaxLog {
			return fmt.Errorf("wasmcore: a log of %d entries exceeds %d", room, wasmabi.MaxLog)
		}
		if err := in.ensure(ctx, int(8*room)); err != nil {
			return err
		}
		b := in.bytes(8 * entries)
		for i := range entries {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(s.Log.At(i)))
		}
	}
	st := &in.stack
	st[0], st[1], st[2], st[3], st[4] = i32(l.alg), f64(l.p.Capacity), f64(l.p.Rate), uint64(l.p.Window), uint64(l.p.Limit)
	st[5], st[6], st[7], st[8] = uint64(s.Words[0]), uint64(s.Words[1]), uint64(s.Words[2]), i32(int32(entries))
	st[9], st[10], st[11], st[12] = uint64(c.At), uint64(c.N), uint64(now), uint64(actual)
	status, err := in.call(ctx, fnLimitSettle)
	if err != nil {
		return err
	}
	if status != wasmabi.StatusOK {
		return statusErr(status, fnLimitSettle)
	}
	b := in.slots()
	if !l.log {
		s.Words = [3]int64{slot(b, wasmabi.SlotSettle), slot(b, wasmabi.SlotSettle+1), slot(b, wasmabi.SlotSettle+2)}
		return nil
	}
	return in.getLog(s, fnLimitSettle, slot(b, wasmabi.SlotLogLen), l.max)
}

// putLog copies the log of s (oldest first) into the scratch buffer and returns its length.
func (in *instance) putLog(ctx context.Context, s *core.State) (int, error) {
	entries := 0
	if s.Log != nil {
		entries = s.Log.Len()
	}
	if entries > wasmabi.MaxLog {
		return 0, fmt.Errorf("wasmcore: a log of %d entries exceeds %d", entries, wasmabi.MaxLog)
	}
	if entries > 0 {
		if err := in.ensure(ctx, 8*entries); err != nil {
			return 0, err
		}
		b := in.bytes(8 * entries)
		for i := range entries {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(s.Log.At(i)))
		}
	}
	return entries, nil
}

// getLog replaces the log of s with the n entries at the start of the scratch buffer, the
// new log export f wrote there, which holds at most most entries.
func (in *instance) getLog(s *core.State, f fn, n, most int64) error {
	if n < 0 || n > most {
		in.broken = true
		return fmt.Errorf("%w: %s returned a log of %d entries, at most %d", ErrTrapped, fnNames[f], n, most)
	}
	if n == 0 {
		if s.Log != nil {
			s.Log.Reset()
		}
		return nil
	}
	out := in.bytes(int(8 * n))
	if s.Log == nil {
		s.Log = new(core.Log)
	}
	s.Log.Reset()
	for i := range int(n) {
		if !s.Log.Append(int64(binary.LittleEndian.Uint64(out[8*i:]))) {
			in.broken = true
			return fmt.Errorf("%w: %s returned an unordered log", ErrTrapped, fnNames[f])
		}
	}
	return nil
}

// lease calls redstream_lease_release (f = fnLeaseRelease) or redstream_lease_extend
// (fnLeaseExtend) for a lease of n units held since at in the concurrency limit l, on the
// key's state s, which it updates. It returns whether the lease still held its units, and
// for an extension the lease's new time.
func (in *instance) lease(ctx context.Context, f fn, l *abiLimit, s *core.State, at, now, n int64) (bool, int64, error) {
	entries, err := in.putLog(ctx, s)
	if err != nil {
		return false, 0, err
	}
	st := &in.stack
	st[0], st[1], st[2], st[3], st[4] = i32(l.alg), f64(l.p.Capacity), f64(l.p.Rate), uint64(l.p.Window), uint64(l.p.Limit)
	st[5], st[6], st[7], st[8] = i32(int32(entries)), uint64(at), uint64(now), uint64(n)
	status, err := in.call(ctx, f)
	if err != nil {
		return false, 0, err
	}
	if status != wasmabi.StatusOK {
		return false, 0, statusErr(status, f)
	}
	b := in.slots()
	done, newAt, length := slot(b, wasmabi.SlotLeaseDone) != 0, int64(0), slot(b, wasmabi.SlotReleaseLen)
	if f == fnLeaseExtend {
		newAt, length = slot(b, wasmabi.SlotExtendAt), slot(b, wasmabi.SlotExtendLen)
	}
	if !done {
		return false, 0, nil
	}
	return true, newAt, in.getLog(s, f, length, int64(entries)) // a lease only removes or moves entries
}

// limitSeed calls redstream_limit_seed: the state of a key under l seeded at now from its
// state old under the previous limit from by c (coreops.SeedState).
func (in *instance) limitSeed(ctx context.Context, l, from *abiLimit, old core.State, now int64, c core.Carry) (core.State, error) {
	st := &in.stack
	st[0], st[1], st[2], st[3], st[4] = i32(l.alg), f64(l.p.Capacity), f64(l.p.Rate), uint64(l.p.Window), uint64(l.p.Limit)
	st[5], st[6], st[7], st[8], st[9] = i32(from.alg), f64(from.p.Capacity), f64(from.p.Rate), uint64(from.p.Window), uint64(from.p.Limit)
	st[10], st[11], st[12], st[13], st[14] = uint64(old.Words[0]), uint64(old.Words[1]), uint64(old.Words[2]), uint64(now), i32(int32(c))
	status, err := in.call(ctx, fnLimitSeed)
	if err != nil {
		return core.State{}, err
	}
	if status != wasmabi.StatusOK {
		return core.State{}, statusErr(status, fnLimitSeed)
	}
	b := in.slots()
	if slot(b, wasmabi.SlotSeedKept) != 0 {
		return old, nil
	}
	return core.State{Words: [3]int64{slot(b, wasmabi.SlotSeedState), slot(b, wasmabi.SlotSeedState+1), slot(b, wasmabi.SlotSeedState+2)}}, nil
}

// windowDedupCheck calls redstream_window_dedup_check and returns whether the element is a
// duplicate and the effective time t.
func (in *instance) windowDedupCheck(ctx context.Context, window, high, last int64, seen bool, now int64) (bool, int64, error) {
	st := &in.stack
	var sn int32
	if seen {
		sn = 1
	}
	st[0], st[1], st[2], st[3], st[4] = uint64(window), uint64(high), uint64(last), i32(sn), uint64(now)
	s, err := in.call(ctx, fnWindowDedupCheck)
	if err != nil {
		return false, 0, err
	}
	if s != wasmabi.StatusOK {
		return false, 0, statusErr(s, fnWindowDedupCheck)
	}
	b := in.slots()
	return slot(b, 0) != 0, slot(b, 1), nil
}

// windowDedupExpired calls redstream_window_dedup_expired.
func (in *instance) windowDedupExpired(ctx context.Context, window, last, t int64) (bool, error) {
	st := &in.stack
	st[0], st[1], st[2] = uint64(window), uint64(last), uint64(t)
	s, err := in.call(ctx, fnWindowDedupExpired)
	if err != nil {
		return false, err
	}
	if s != wasmabi.StatusOK {
		return false, statusErr(s, fnWindowDedupExpired)
	}
	return slot(in.slots(), 0) != 0, nil
}

// bloomParams calls redstream_bloom_params.
func (in *instance) bloomParams(ctx context.Context, insertions int64, fpRate float64, shards int32) (core.Bloom, error) {
	st := &in.stack
	st[0], st[1], st[2] = uint64(insertions), f64(fpRate), i32(shards)
	s, err := in.call(ctx, fnBloomParams)
	if err != nil {
		return core.Bloom{}, err
	}
	if s != wasmabi.StatusOK {
		return core.Bloom{}, statusErr(s, fnBloomParams)
	}
	b := in.slots()
	return core.Bloom{Insertions: insertions, FPRate: fpRate, K: int(slot(b, 0)), Bits: uint64(slot(b, 1)),
		Shards: int(slot(b, 2)), ShardBits: uint64(slot(b, 3))}, nil
}

// bloomPositions calls redstream_bloom_positions and appends the element's positions to
// pos.
func (in *instance) bloomPositions(ctx context.Context, b core.Bloom, elem []byte, pos []uint64) (int, []uint64, error) {
	if err := in.ensure(ctx, max(len(elem), 8*b.K)); err != nil {
		return 0, pos, err
	}
	if len(elem) > 0 {
		copy(in.bytes(len(elem)), elem)
	}
	st := &in.stack
	st[0], st[1], st[2], st[3] = i32(int32(b.K)), b.ShardBits, i32(int32(b.Shards)), i32(int32(len(elem)))
	s, err := in.call(ctx, fnBloomPositions)
	if err != nil {
		return 0, pos, err
	}
	if s != wasmabi.StatusOK {
		return 0, pos, statusErr(s, fnBloomPositions)
	}
	shard := slot(in.slots(), 0)
	if shard < 0 || shard >= int64(b.Shards) {
		in.broken = true
		return 0, pos, fmt.Errorf("%w: %s returned shard %d of %d", ErrTrapped, fnNames[fnBloomPositions], shard, b.Shards)
	}
	raw := in.bytes(8 * b.K)
	for i := 0; i < b.K; i++ {
		v := binary.LittleEndian.Uint64(raw[8*i:])
		if v >= b.ShardBits {
			in.broken = true
			return 0, pos, fmt.Errorf("%w: %s returned position %d of %d", ErrTrapped, fnNames[fnBloomPositions], v, b.ShardBits)
		}
		pos = append(pos, v)
	}
	return int(shard), pos, nil
}

// bloomEstimate calls redstream_bloom_estimate_count.
func (in *instance) bloomEstimate(ctx context.Context, k int, shardBits, ones uint64) (int64, error) {
	st := &in.stack
	st[0], st[1], st[2] = i32(int32(k)), shardBits, ones
	s, err := in.call(ctx, fnBloomEstimate)
	if err != nil {
		return 0, err
	}
	if s != wasmabi.StatusOK {
		return 0, statusErr(s, fnBloomEstimate)
	}
	return slot(in.slots(), 0), nil
}

// murmur3 calls redstream_murmur3_x64_128.
func (in *instance) murmur3(ctx context.Context, data []byte, seed uint32) (uint64, uint64, error) {
	if err := in.ensure(ctx, len(data)); err != nil {
		return 0, 0, err
	}
	if len(data) > 0 {
		copy(in.bytes(len(data)), data)
	}
	st := &in.stack
	st[0], st[1] = i32(int32(len(data))), i32(int32(seed))
	s, err := in.call(ctx, fnMurmur3)
	if err != nil {
		return 0, 0, err
	}
	if s != wasmabi.StatusOK {
		return 0, 0, statusErr(s, fnMurmur3)
	}
	b := in.slots()
	return uint64(slot(b, 0)), uint64(slot(b, 1)), nil
}

// backoffBase calls redstream_backoff_base.
func (in *instance) backoffBase(ctx context.Context, initial, maxDelay int64, multiplier float64, attempt int64) (int64, error) {
	st := &in.stack
	st[0], st[1], st[2], st[3] = uint64(initial), uint64(maxDelay), f64(multiplier), uint64(attempt)
	s, err := in.call(ctx, fnBackoffBase)
	if err != nil {
		return 0, err
	}
	if s != wasmabi.StatusOK {
		return 0, statusErr(s, fnBackoffBase)
	}
	return slot(in.slots(), 0), nil
}

// backoffDelay calls redstream_backoff_delay.
func (in *instance) backoffDelay(ctx context.Context, initial, maxDelay int64, multiplier float64, jitter core.Jitter, attempt, prev int64, random uint64) (int64, error) {
	st := &in.stack
	st[0], st[1], st[2], st[3], st[4], st[5], st[6] = uint64(initial), uint64(maxDelay), f64(multiplier), i32(int32(jitter)), uint64(attempt), uint64(prev), random
	s, err := in.call(ctx, fnBackoffDelay)
	if err != nil {
		return 0, err
	}
	if s != wasmabi.StatusOK {
		return 0, statusErr(s, fnBackoffDelay)
	}
	return slot(in.slots(), 0), nil
}
