// Package wasmvec generates the test vectors of the redstream core module's ABI from
// package core: calls of every export with their expected status and results.
package wasmvec

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

// VectorFile is the JSON document of the test vectors: calls of every export with their
// expected status and results, computed natively from package core. A runtime that embeds
// the module passes them all iff it calls the module as ABI.md describes.
type VectorFile struct {
	Comment    string         `json:"comment"`
	ABIVersion int            `json:"abi_version"`
	Exports    []VectorExport `json:"exports"`
	Cases      []Vector       `json:"cases"`
}

// VectorExport describes an export for the vector runner: its parameter types, in order,
// and how many result slots a successful call fills.
type VectorExport struct {
	Name   string   `json:"name"`
	Params []string `json:"params"`
	Types  []string `json:"types"`
	Slots  int      `json:"slots"`
}

// Vector is one call. Args are decimal strings (i32 and i64, signed) or, for f64,
// JavaScript/Go number syntax including "NaN", "Infinity" and "-Infinity". Input, when
// set, is hex to write at the scratch buffer's start before the call; Results are the
// expected slots (decimal int64) when Status is 0; Output, when set, is the hex expected
// at the scratch buffer's start after the call.
type Vector struct {
	Export  string         `json:"export"`
	Args    []string       `json:"args"`
	Input   string         `json:"input,omitempty"`
	Status  wasmabi.Status `json:"status"`
	Results []string       `json:"results,omitempty"`
	Output  string         `json:"output,omitempty"`
}

// FormatF64 formats an f64 argument of a vector.
func FormatF64(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// ParseF64 parses an f64 argument of a vector.
func ParseF64(s string) (float64, error) {
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}

// vgen builds the vectors.
type vgen struct {
	rnd   *rand.Rand
	cases []Vector
	log   core.Log
	pos   []uint64
}

func i64s(vs ...int64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatInt(v, 10)
	}
	return out
}

func (g *vgen) add(export string, args []string, input []byte, st wasmabi.Status, r *wasmabi.Results, output []byte) {
	e, ok := wasmabi.Lookup(export)
	if !ok {
		panic("wasmabi: unknown export " + export)
	}
	v := Vector{Export: export, Args: args, Status: st}
	if len(input) > 0 {
		v.Input = hex.EncodeToString(input)
	}
	if st == wasmabi.StatusOK {
		v.Results = i64s(r[:e.Slots]...)
		if len(output) > 0 {
			v.Output = hex.EncodeToString(output)
		}
	}
	g.cases = append(g.cases, v)
}

// t0 is 2026-01-01T00:00:00Z in µs.
const t0 int64 = 1767225600000000

var (
	vecRates   = []float64{0.25, 1, 3, 5, 7.5, 10, 100, 1000, 250000, 1e6}
	vecWindows = []int64{1, 1000, 7000, 100000, core.Second, 1500000, 60 * core.Second, 3600 * core.Second}
)

// dt draws a time step around period p, sometimes negative, sometimes a long gap.
func (g *vgen) dt(p int64) int64 {
	switch g.rnd.IntN(8) {
	case 0, 1:
		return 0
	case 2:
		return g.rnd.Int64N(max(1, p/4)) + 1
	case 3:
		return p
	case 4:
		return -g.rnd.Int64N(2*p) - 1
	case 5:
		return p*3 + g.rnd.Int64N(p*100)
	}
	return g.rnd.Int64N(2*p) + p/2
}

// cost draws a cost, sometimes invalid or too large.
func (g *vgen) cost(limit int64) int64 {
	switch g.rnd.IntN(10) {
	case 0:
		return -g.rnd.Int64N(3)
	case 1:
		return limit + 1 + g.rnd.Int64N(3)
	case 2, 3:
		return 1 + g.rnd.Int64N(limit)
	}
	return 1
}

// algs are the algorithms of core's registry, the alg argument of the limit exports being
// the index of one.
var algs = core.Algorithms()

// params returns parameters of a's shape drawn for a sequence.
func (g *vgen) params(a core.Algorithm) core.Params {
	if a.Shape == core.Bucket {
		capacity := float64(1 + g.rnd.IntN(20))
		if g.rnd.IntN(2) == 0 {
			capacity = 1 + 19*g.rnd.Float64()
		}
		return core.Params{Capacity: capacity, Rate: vecRates[g.rnd.IntN(len(vecRates))]}
	}
	return core.Params{Window: vecWindows[g.rnd.IntN(len(vecWindows))], Limit: 1 + g.rnd.Int64N(20)}
}

func paramArgs(alg int32, p core.Params) []string {
	return append([]string{strconv.Itoa(int(alg)), FormatF64(p.Capacity), FormatF64(p.Rate)}, i64s(p.Window, p.Limit)...)
}

func logBytes(log []int64) []byte {
	b := make([]byte, 8*len(log))
	for i, ts := range log {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(ts))
	}
	return b
}

// keyState is a key's state as the limit exports take it: words, or a log.
type keyState struct {
	w   [3]int64
	log []int64
}

// limits adds the vectors of the three limit exports: bad parameters for every shape,
// bad states, and sequences of steps (with idle checks) for every algorithm.
func (g *vgen) limits() {
	g.limitParams(-1, core.Params{Capacity: 10, Rate: 5})
	g.limitParams(int32(len(algs)), core.Params{Window: core.Second, Limit: 10})
	for i, a := range algs {
		g.limitsOf(int32(i), a)
	}
	for i := range algs {
		g.settles(int32(i))
	}
	g.leases()
	g.seeds()
}

// leases adds, for the concurrency limit, leases taken by steps, then released and
// extended: live, released twice, expired and forged leases, and bad input.
func (g *vgen) leases() {
	alg := int32(-1)
	for i, a := range algs {
		if a.Name == "concurrency" {
			alg = int32(i)
		}
	}
	p := core.Params{Window: core.Second, Limit: 4}
	now := int64(1767225600000000)
	var s keyState
	s = g.limitStep(alg, p, s, 0, now, 2)                                      // lease A: 2 units at now
	s = g.limitStep(alg, p, s, int32(len(s.log)), now+100*core.Millisecond, 1) // lease B: 1 unit
	s = g.lease(wasmabi.ExportLeaseExtend, alg, p, s, now+100*core.Millisecond, now+300*core.Millisecond, 1)
	s = g.lease(wasmabi.ExportLeaseRelease, alg, p, s, now, now+200*core.Millisecond, 2)
	g.lease(wasmabi.ExportLeaseRelease, alg, p, s, now, now+250*core.Millisecond, 2)                      // released already
	g.lease(wasmabi.ExportLeaseRelease, alg, p, s, now+7, now+250*core.Millisecond, 1)                    // no such lease
	g.lease(wasmabi.ExportLeaseExtend, alg, p, s, now+300*core.Millisecond, now+2*core.Second, 1)         // expired
	g.lease(wasmabi.ExportLeaseRelease, alg, p, s, now+300*core.Millisecond, now+400*core.Millisecond, 0) // INVALID_COST
	g.lease(wasmabi.ExportLeaseRelease, alg, p, s, now+300*core.Millisecond, now+400*core.Millisecond, 5) // COST_TOO_LARGE
	g.lease(wasmabi.ExportLeaseExtend, alg, p, s, now+300*core.Millisecond, -1, 1)                        // INVALID_TIME
	g.lease(wasmabi.ExportLeaseRelease, 0, core.Params{Capacity: 10, Rate: 5}, keyState{}, now, now, 1)   // INVALID_CONFIG
	g.lease(wasmabi.ExportLeaseRelease, alg, p, s, now+300*core.Millisecond, now+400*core.Millisecond, 1)
}

// lease adds a call of the release or extend export (name) for a lease of n units held
// since at, and returns the key's state after it.
func (g *vgen) lease(name string, alg int32, p core.Params, s keyState, at, now, n int64) keyState {
	var r wasmabi.Results
	in := logBytes(s.log)
	buf := make([]byte, max(len(in), 8))
	copy(buf, in)
	f, slots := wasmabi.LeaseRelease, wasmabi.SlotReleaseLen
	if name == wasmabi.ExportLeaseExtend {
		f, slots = wasmabi.LeaseExtend, wasmabi.SlotExtendLen
	}
	st := f(&r, nil, &g.log, buf, alg, p.Capacity, p.Rate, p.Window, p.Limit, int32(len(s.log)), at, now, n)
	var out []byte
	if st == wasmabi.StatusOK {
		out = buf[:8*r[slots]]
	}
	g.add(name, append(paramArgs(alg, p), i64s(int64(len(s.log)), at, now, n)...), in, st, &r, out)
	if st != wasmabi.StatusOK || r[wasmabi.SlotLeaseDone] == 0 {
		return s
	}
	log := make([]int64, r[slots])
	for i := range log {
		log[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return keyState{log: log}
}

// seeds adds limit changes for every algorithm: raised and lowered by each strategy from a
// state a step left, an unchanged limit, a change of window, and bad input.
func (g *vgen) seeds() {
	now := int64(1767225600000000)
	for i, a := range algs {
		alg := int32(i)
		from, to, lower := core.Params{Capacity: 10, Rate: 5}, core.Params{Capacity: 20, Rate: 10}, core.Params{Capacity: 4, Rate: 2}
		if a.Shape == core.Window {
			from, to, lower = core.Params{Window: core.Second, Limit: 10}, core.Params{Window: core.Second, Limit: 20}, core.Params{Window: core.Second, Limit: 4}
		}
		s := g.limitStep(alg, from, keyState{}, 0, now, 7)
		for c := int32(0); c <= 2; c++ {
			g.limitSeed(alg, to, alg, from, s.w, now+100*core.Millisecond, c)
			g.limitSeed(alg, lower, alg, from, s.w, now+100*core.Millisecond, c)
		}
		g.limitSeed(alg, from, alg, from, s.w, now, 1) // unchanged: kept
		if a.Shape == core.Window {
			g.limitSeed(alg, core.Params{Window: 2 * core.Second, Limit: 10}, alg, from, s.w, now, 1) // another window: reset
		}
		g.limitSeed(alg, to, alg, from, s.w, now, 3)          // INVALID_CONFIG: no such strategy
		g.limitSeed(alg, to, alg, from, s.w, -1, 1)           // INVALID_TIME
		g.limitSeed(alg, to, alg, from, [3]int64{-1}, now, 1) // INVALID_STATE
	}
	g.limitSeed(0, core.Params{Capacity: 10, Rate: 5}, 2, core.Params{Window: core.Second, Limit: 10}, [3]int64{}, now, 1) // another algorithm: reset
}

// limitSeed adds a call of the seed export.
func (g *vgen) limitSeed(alg int32, p core.Params, fromAlg int32, from core.Params, w [3]int64, now int64, carry int32) {
	var r wasmabi.Results
	st := wasmabi.LimitSeed(&r, nil, alg, p.Capacity, p.Rate, p.Window, p.Limit, fromAlg, from.Capacity, from.Rate, from.Window, from.Limit, w[0], w[1], w[2], now, carry)
	args := append(paramArgs(alg, p), paramArgs(fromAlg, from)...)
	args = append(args, i64s(w[0], w[1], w[2], now)...)
	g.add(wasmabi.ExportLimitSeed, append(args, strconv.Itoa(int(carry))), nil, st, &r, nil)
}

// settles adds, for one algorithm, reservations (steps), their charges and settlements:
// a refund, a cancel and a charge beyond the estimate, and a settlement's bad input.
func (g *vgen) settles(alg int32) {
	p := core.Params{Capacity: 10, Rate: 5, Window: core.Second, Limit: 10}
	lim, _ := algs[alg].New(p)
	now := int64(1767225600000000)
	var s keyState
	for _, c := range [][2]int64{{4, 1}, {3, 0}, {2, 6}, {5, 5}} {
		after := g.limitStep(alg, p, s, int32(len(s.log)), now, c[0])
		var d core.Decision
		var next coreops.Next
		var st core.State
		if len(s.log) > 0 {
			var l core.Log
			for _, ts := range s.log {
				l.Append(ts)
			}
			st.Log = &l
		} else {
			st.Words = s.w
		}
		_ = coreops.CheckState(lim, &st, now, c[0], &d, &next)
		at := g.limitCharge(alg, p, now, c[0], &d)
		s = g.limitSettle(alg, p, lim.Max(), after, at, c[0], now+core.Millisecond, c[1])
		now += 100 * core.Millisecond
	}
	g.limitSettle(alg, p, lim.Max(), s, now, 1, now, -1) // INVALID_COST
	g.limitSettle(alg, p, lim.Max(), s, now, 1, -1, 0)   // INVALID_TIME
}

// limitCharge adds a call of the charge export and returns the charge's At.
func (g *vgen) limitCharge(alg int32, p core.Params, now, n int64, d *core.Decision) int64 {
	var r wasmabi.Results
	allowed := int32(0)
	if d.Allowed {
		allowed = 1
	}
	st := wasmabi.LimitCharge(&r, nil, alg, p.Capacity, p.Rate, p.Window, p.Limit, now, n, allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay)
	args := append(paramArgs(alg, p), i64s(now, n)...)
	args = append(args, strconv.Itoa(int(allowed)))
	g.add(wasmabi.ExportLimitCharge, append(args, i64s(d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay)...), nil, st, &r, nil)
	return r[0]
}

// limitSettle adds a call of the settle export (the scratch buffer holding room for max
// entries) and returns the key's state after it.
func (g *vgen) limitSettle(alg int32, p core.Params, max int64, s keyState, at, charged, now, actual int64) keyState {
	var r wasmabi.Results
	in := make([]byte, 8*max)
	copy(in, logBytes(s.log))
	buf := append([]byte(nil), in...)
	st := wasmabi.LimitSettle(&r, nil, &g.log, buf, alg, p.Capacity, p.Rate, p.Window, p.Limit, s.w[0], s.w[1], s.w[2], int32(len(s.log)), at, charged, now, actual)
	var out []byte
	if st == wasmabi.StatusOK {
		out = buf
	}
	g.add(wasmabi.ExportLimitSettle, append(paramArgs(alg, p), i64s(s.w[0], s.w[1], s.w[2], int64(len(s.log)), at, charged, now, actual)...), in, st, &r, out)
	if st != wasmabi.StatusOK {
		return s
	}
	if algs[alg].Words > 0 {
		return keyState{w: [3]int64{r[wasmabi.SlotSettle], r[wasmabi.SlotSettle+1], r[wasmabi.SlotSettle+2]}}
	}
	n := r[wasmabi.SlotLogLen]
	log := make([]int64, n)
	for i := range log {
		log[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return keyState{log: log}
}

// limitParams adds a call of the params export.
func (g *vgen) limitParams(alg int32, p core.Params) {
	var r wasmabi.Results
	st := wasmabi.LimitParams(&r, nil, alg, p.Capacity, p.Rate, p.Window, p.Limit)
	g.add(wasmabi.ExportLimitParams, paramArgs(alg, p), nil, st, &r, nil)
}

// limitStep adds a call of the step export and returns the key's state after it.
func (g *vgen) limitStep(alg int32, p core.Params, s keyState, length int32, now, n int64) keyState {
	var r wasmabi.Results
	in := logBytes(s.log)
	buf := make([]byte, max(len(in), 8))
	copy(buf, in)
	st := wasmabi.LimitStep(&r, nil, &g.log, buf, alg, p.Capacity, p.Rate, p.Window, p.Limit, s.w[0], s.w[1], s.w[2], length, now, n)
	g.add(wasmabi.ExportLimitStep, append(paramArgs(alg, p), i64s(s.w[0], s.w[1], s.w[2], int64(length), now, n)...), in, st, &r, nil)
	if st != wasmabi.StatusOK || r[wasmabi.SlotAllowed] == 0 {
		return s
	}
	next := [3]int64{r[wasmabi.SlotState0], r[wasmabi.SlotState1], r[wasmabi.SlotState2]}
	if algs[alg].Words > 0 {
		return keyState{w: next}
	}
	out := append([]int64(nil), s.log[next[0]:]...)
	for i := int64(0); i < next[1]; i++ {
		out = append(out, next[2])
	}
	return keyState{log: out}
}

// limitIdle adds a call of the idle export.
func (g *vgen) limitIdle(alg int32, p core.Params, s keyState, now int64) {
	var r wasmabi.Results
	in := logBytes(s.log)
	buf := make([]byte, max(len(in), 8))
	copy(buf, in)
	st := wasmabi.LimitIdle(&r, nil, &g.log, buf, alg, p.Capacity, p.Rate, p.Window, p.Limit, s.w[0], s.w[1], s.w[2], int32(len(s.log)), now)
	g.add(wasmabi.ExportLimitIdle, append(paramArgs(alg, p), i64s(s.w[0], s.w[1], s.w[2], int64(len(s.log)), now)...), in, st, &r, nil)
}

// limitsOf adds the calls of one algorithm: bad parameters, bad states, times and costs,
// then sequences of steps and idle checks.
func (g *vgen) limitsOf(alg int32, a core.Algorithm) {
	if a.Shape == core.Bucket {
		for _, c := range [][2]float64{{0, 1}, {0.5, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {10, 0}, {10, -1},
			{10, math.NaN()}, {10, math.Inf(1)}, {10, 2e6}, {float64(core.MaxCount) * 2, 1}, {1e12, 1e-6}, {10, 5}, {3.7, 0.3}} {
			g.limitParams(alg, core.Params{Capacity: c[0], Rate: c[1]})
		}
	} else {
		for _, c := range [][2]int64{{0, 10}, {-1, 10}, {core.MaxDuration + 1, 10}, {core.Second, 0}, {core.Second, core.MaxCount + 1},
			{core.MaxDuration, 1 << 10}, {core.Second, core.MaxLogLimit + 1}, {core.Second, 10}} {
			g.limitParams(alg, core.Params{Window: c[0], Limit: c[1]})
		}
	}
	p := g.params(a)
	lim, _ := a.New(p)
	// Bad states, times and costs.
	g.limitStep(alg, p, keyState{w: [3]int64{-1}}, 0, t0, 1)
	g.limitStep(alg, p, keyState{w: [3]int64{0, 0, core.MaxTime + core.MaxDuration + 1}}, 0, t0, 1)
	g.limitStep(alg, p, keyState{}, -1, t0, 1)
	g.limitStep(alg, p, keyState{}, 0, -1, 1)
	g.limitStep(alg, p, keyState{}, 0, core.MaxTime+1, 1)
	g.limitStep(alg, p, keyState{}, 0, core.MaxTime, 1)
	g.limitStep(alg, p, keyState{}, 0, t0, 0)
	g.limitStep(alg, p, keyState{}, 0, t0, lim.Max()+1)
	if a.Words == 0 {
		g.limitStep(alg, p, keyState{log: []int64{t0, t0 - 1}}, 2, t0, 1)                         // unsorted
		g.limitStep(alg, p, keyState{log: []int64{-1}}, 1, t0, 1)                                 // negative timestamp
		g.limitStep(alg, p, keyState{log: make([]int64, lim.Max()+1)}, int32(lim.Max()+1), t0, 1) // longer than the limit
	} else {
		g.limitStep(alg, p, keyState{log: []int64{t0}}, 1, t0, 1) // a log for an algorithm of words
	}
	// Sequences.
	for seq := 0; seq < 12; seq++ {
		p := g.params(a)
		lim, _ := a.New(p)
		now := t0 + g.rnd.Int64N(1e12)
		var s keyState
		for i := 0; i < 8; i++ {
			now += g.dt(max(1, lim.Period()/max(1, lim.Max())))
			s = g.limitStep(alg, p, s, int32(len(s.log)), now, g.cost(lim.Max()))
			if i%3 == 2 {
				g.limitIdle(alg, p, s, now+g.dt(lim.Period()))
			}
		}
	}
}

func (g *vgen) windowDedup() {
	check := func(window, high, last int64, seen int32, now int64) {
		var r wasmabi.Results
		st := wasmabi.WindowDedupCheck(&r, window, high, last, seen, now)
		g.add(wasmabi.ExportWindowDedupCheck, i64s(window, high, last, int64(seen), now), nil, st, &r, nil)
	}
	expired := func(window, last, t int64) {
		var r wasmabi.Results
		st := wasmabi.WindowDedupExpired(&r, window, last, t)
		g.add(wasmabi.ExportWindowDedupExpired, i64s(window, last, t), nil, st, &r, nil)
	}
	w := core.Second
	check(0, 0, 0, 0, t0)
	check(w, 0, 0, 0, -1)
	check(w, -1, 0, 0, t0)
	check(w, t0, -1, 1, t0)
	check(w, t0, t0, 2, t0)
	check(w, 0, 0, 0, t0)         // never seen
	check(w, t0, t0, 1, t0)       // seen now
	check(w, t0, t0, 1, t0+w-1)   // last µs of the window
	check(w, t0, t0, 1, t0+w)     // exactly one window later: not a duplicate
	check(w, t0+w, t0, 1, t0+w-5) // time went backwards: runs at the high-water mark
	check(w, t0+2*w, t0, 1, t0)   // expired entry does not come back
	expired(0, t0, t0)
	expired(w, t0, -1)
	expired(w, -1, t0)
	expired(w, t0, t0+w)
	expired(w, t0, t0+w-1)
	for i := 0; i < 30; i++ {
		w := vecWindows[g.rnd.IntN(len(vecWindows))]
		high := t0 + g.rnd.Int64N(1e12)
		last := high - g.rnd.Int64N(3*w)
		now := high + g.dt(w)
		check(w, high, last, int32(g.rnd.IntN(2)), now)
		expired(w, last, max(high, now))
	}
}

func (g *vgen) bloom() {
	params := func(n int64, p float64, shards int32) (wasmabi.Results, wasmabi.Status) {
		var r wasmabi.Results
		st := wasmabi.BloomParams(&r, n, p, shards)
		g.add(wasmabi.ExportBloomParams, []string{strconv.FormatInt(n, 10), FormatF64(p), strconv.Itoa(int(shards))}, nil, st, &r, nil)
		return r, st
	}
	positions := func(k int32, shardBits int64, shards int32, elem []byte, length int32) {
		var r wasmabi.Results
		buf := make([]byte, max(len(elem), 8*int(max(k, 0)), 8))
		copy(buf, elem)
		var st wasmabi.Status
		g.pos, st = wasmabi.BloomPositions(&r, g.pos, buf, k, shardBits, shards, length)
		var out []byte
		if st == wasmabi.StatusOK {
			out = buf[:8*k]
		}
		g.add(wasmabi.ExportBloomPositions, i64s(int64(k), shardBits, int64(shards), int64(length)), elem, st, &r, out)
	}
	estimate := func(k int32, shardBits, ones int64) {
		var r wasmabi.Results
		st := wasmabi.BloomEstimateCount(&r, k, shardBits, ones)
		g.add(wasmabi.ExportBloomEstimate, i64s(int64(k), shardBits, ones), nil, st, &r, nil)
	}
	params(0, 0.03, 0)
	params(1000, 0, 0)
	params(1000, 1, 0)
	params(1000, math.NaN(), 0)
	params(1000, 0.03, -1)
	params(1000, 0.03, 1<<16+1)
	params(core.MaxCount, 1e-300, 0)
	params(1<<40, 0.5, 1)
	positions(0, 100, 1, []byte("a"), 1)
	positions(3, 0, 1, []byte("a"), 1)
	positions(3, int64(core.MaxShardBits)+1, 1, []byte("a"), 1)
	positions(3, 100, 0, []byte("a"), 1)
	positions(wasmabi.MaxBloomK+1, 100, 1, []byte("a"), 1)
	positions(3, 100, 1, []byte("a"), -1)
	estimate(0, 100, 1)
	estimate(3, 100, -1)
	estimate(3, 100, 100)
	estimate(3, 100, 0)
	elems := [][]byte{{}, []byte("a"), []byte("hello"), []byte("0123456789abcdef"), []byte("0123456789abcdefX"),
		[]byte("{x}"), {0, 0xff, 1}, []byte("ключ"), bytes.Repeat([]byte("z"), 300)}
	for i := 0; i < 20; i++ {
		n := 1 + g.rnd.Int64N(1e7)
		p := []float64{0.5, 0.2, 0.03, 0.01, 0.001, 1e-9}[g.rnd.IntN(6)]
		shards := int32(g.rnd.IntN(5))
		r, st := params(n, p, shards)
		if st != wasmabi.StatusOK {
			continue
		}
		k, shardBits, sh := int32(r[0]), r[3], int32(r[2])
		e := elems[g.rnd.IntN(len(elems))]
		if g.rnd.IntN(2) == 0 {
			e = []byte(fmt.Sprintf("elem-%d", g.rnd.IntN(1000)))
		}
		positions(k, shardBits, sh, e, int32(len(e)))
		estimate(k, shardBits, g.rnd.Int64N(shardBits+1))
	}
}

func (g *vgen) murmur() {
	call := func(data []byte, length, seed int32) {
		var r wasmabi.Results
		buf := make([]byte, max(len(data), 8))
		copy(buf, data)
		st := wasmabi.Murmur3(&r, buf, length, seed)
		g.add(wasmabi.ExportMurmur3, i64s(int64(length), int64(seed)), data, st, &r, nil)
	}
	call(nil, -1, 0)
	call([]byte("abc"), 3, -1)
	for n := 0; n <= 33; n++ {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(g.rnd.IntN(256))
		}
		call(data, int32(n), int32(g.rnd.Uint32()))
	}
	call([]byte("The quick brown fox jumps over the lazy dog"), 43, 0)
}

func (g *vgen) backoff() {
	base := func(initial, maxD int64, m float64, attempt int64) {
		var r wasmabi.Results
		st := wasmabi.BackoffBase(&r, initial, maxD, m, attempt)
		g.add(wasmabi.ExportBackoffBase, []string{strconv.FormatInt(initial, 10), strconv.FormatInt(maxD, 10), FormatF64(m), strconv.FormatInt(attempt, 10)}, nil, st, &r, nil)
	}
	delay := func(initial, maxD int64, m float64, jitter int32, attempt, prev int64, random uint64) {
		var r wasmabi.Results
		st := wasmabi.BackoffDelay(&r, initial, maxD, m, jitter, attempt, prev, int64(random))
		g.add(wasmabi.ExportBackoffDelay, []string{strconv.FormatInt(initial, 10), strconv.FormatInt(maxD, 10), FormatF64(m),
			strconv.Itoa(int(jitter)), strconv.FormatInt(attempt, 10), strconv.FormatInt(prev, 10), strconv.FormatInt(int64(random), 10)}, nil, st, &r, nil)
	}
	base(-1, 10, 2, 1)
	base(10, 5, 2, 1)
	base(10, core.MaxDuration+1, 2, 1)
	base(10, 100, 0.5, 1)
	base(10, 100, math.NaN(), 1)
	base(10, 100, 1001, 1)
	delay(10, 100, 2, 4, 1, 0, 0)
	delay(10, 100, 2, -1, 1, 0, 0)
	base(100000, 30000000, 2, 0)
	base(100000, 30000000, 2, -5)
	base(100000, 30000000, 2, 1000)
	base(1, 10, 1.5, math.MaxInt64) // a fixed point: the delay stays 1
	base(core.MaxDuration, core.MaxDuration, 1000, 3)
	for i := 0; i < 30; i++ {
		initial := g.rnd.Int64N(2 * core.Second)
		maxD := initial + g.rnd.Int64N(60*core.Second)
		m := []float64{1, 1.001, 1.5, 2, 2.5, 3, 10, 1000}[g.rnd.IntN(8)]
		attempt := g.rnd.Int64N(40) - 2
		base(initial, maxD, m, attempt)
		delay(initial, maxD, m, int32(g.rnd.IntN(4)), attempt, g.rnd.Int64N(maxD+1), g.rnd.Uint64())
	}
}

// Vectors returns the test vectors, computed natively from package core. The output is
// deterministic.
func Vectors() VectorFile {
	g := &vgen{rnd: rand.New(rand.NewPCG(2026, 1))}
	g.limits()
	g.windowDedup()
	g.bloom()
	g.murmur()
	g.backoff()
	f := VectorFile{
		Comment:    "Code generated by wasmcore/internal/wasmgen from package core; DO NOT EDIT. See wasmcore/ABI.md.",
		ABIVersion: wasmabi.Version,
		Cases:      g.cases,
	}
	for _, e := range wasmabi.Exports {
		if e.Direct {
			continue
		}
		ve := VectorExport{Name: e.Name, Slots: e.Slots}
		for _, p := range e.Params {
			ve.Params = append(ve.Params, p.Name)
			ve.Types = append(ve.Types, string(p.Type))
		}
		f.Exports = append(f.Exports, ve)
	}
	return f
}

// VectorsJSON returns Vectors encoded as the committed JSON file: one export and one case
// per line.
func VectorsJSON() ([]byte, error) {
	f := Vectors()
	var b bytes.Buffer
	head, err := json.Marshal(f.Comment)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "{\n  \"comment\": %s,\n  \"abi_version\": %d,\n  \"exports\": [\n", head, f.ABIVersion)
	if err := lines(&b, f.Exports); err != nil {
		return nil, err
	}
	b.WriteString("  ],\n  \"cases\": [\n")
	if err := lines(&b, f.Cases); err != nil {
		return nil, err
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes(), nil
}

// lines writes one JSON value per line, comma-separated.
func lines[T any](b *bytes.Buffer, vs []T) error {
	for i, v := range vs {
		line, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.WriteString("    ")
		b.Write(line)
		if i < len(vs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	return nil
}
