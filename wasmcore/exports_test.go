package wasmcore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/tetratelabs/wazero/api"
	"pgregory.net/rapid"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

// native calls the native implementation of an export: the same functions the guest wraps,
// run on the host on package core.
func native(name string, a []uint64, buf []byte) (wasmabi.Status, wasmabi.Results, []byte) {
	var r wasmabi.Results
	var lg core.Log
	i := func(k int) int64 { return int64(a[k]) }
	i32 := func(k int) int32 { return api.DecodeI32(a[k]) }
	f := func(k int) float64 { return math.Float64frombits(a[k]) }
	var s wasmabi.Status
	switch name {
	case wasmabi.ExportLimitParams:
		s = wasmabi.LimitParams(&r, nil, i32(0), f(1), f(2), i(3), i(4))
	case wasmabi.ExportLimitStep:
		s = wasmabi.LimitStep(&r, nil, &lg, buf, i32(0), f(1), f(2), i(3), i(4), i(5), i(6), i(7), i32(8), i(9), i(10))
	case wasmabi.ExportLimitIdle:
		s = wasmabi.LimitIdle(&r, nil, &lg, buf, i32(0), f(1), f(2), i(3), i(4), i(5), i(6), i(7), i32(8), i(9))
	case wasmabi.ExportWindowDedupCheck:
		s = wasmabi.WindowDedupCheck(&r, i(0), i(1), i(2), i32(3), i(4))
	case wasmabi.ExportWindowDedupExpired:
		s = wasmabi.WindowDedupExpired(&r, i(0), i(1), i(2))
	case wasmabi.ExportBloomParams:
		s = wasmabi.BloomParams(&r, i(0), f(1), i32(2))
	case wasmabi.ExportBloomPositions:
		_, s = wasmabi.BloomPositions(&r, nil, buf, i32(0), i(1), i32(2), i32(3))
	case wasmabi.ExportBloomEstimate:
		s = wasmabi.BloomEstimateCount(&r, i32(0), i(1), i(2))
	case wasmabi.ExportMurmur3:
		s = wasmabi.Murmur3(&r, buf, i32(0), i32(1))
	case wasmabi.ExportBackoffBase:
		s = wasmabi.BackoffBase(&r, i(0), i(1), f(2), i(3))
	case wasmabi.ExportBackoffDelay:
		s = wasmabi.BackoffDelay(&r, i(0), i(1), f(2), i32(3), i(4), i(5), i(6))
	case wasmabi.ExportLimitCharge:
		s = wasmabi.LimitCharge(&r, nil, i32(0), f(1), f(2), i(3), i(4), i(5), i(6), i32(7), i(8), i(9), i(10), i(11), i(12))
	case wasmabi.ExportLimitSettle:
		s = wasmabi.LimitSettle(&r, nil, &lg, buf, i32(0), f(1), f(2), i(3), i(4), i(5), i(6), i(7), i32(8), i(9), i(10), i(11), i(12))
	case wasmabi.ExportLeaseRelease:
		s = wasmabi.LeaseRelease(&r, nil, &lg, buf, i32(0), f(1), f(2), i(3), i(4), i32(5), i(6), i(7), i(8))
	case wasmabi.ExportLeaseExtend:
		s = wasmabi.LeaseExtend(&r, nil, &lg, buf, i32(0), f(1), f(2), i(3), i(4), i32(5), i(6), i(7), i(8))
	case wasmabi.ExportLimitSeed:
		s = wasmabi.LimitSeed(&r, nil, i32(0), f(1), f(2), i(3), i(4), i32(5), f(6), f(7), i(8), i(9), i(10), i(11), i(12), i(13), i32(14))
	default:
		panic("unknown export " + name)
	}
	return s, r, buf
}

// drawArg draws an argument of type t: usually a plausible value, sometimes an edge or an
// arbitrary bit pattern, so that bad input is exercised as often as good.
func drawArg(t *rapid.T, typ wasmabi.ValType, name string) uint64 {
	switch name {
	case "alg", "from_alg": // an index of core.Algorithms(), sometimes one past either end
		return api.EncodeI32(int32(rapid.IntRange(-1, len(core.Algorithms())).Draw(t, name)))
	case "carry": // a strategy, sometimes none
		return api.EncodeI32(int32(rapid.IntRange(-1, 3).Draw(t, name)))
	case "s0", "s1", "s2": // state words: often unused (0)
		if rapid.Bool().Draw(t, name+".zero") {
			return 0
		}
	}
	switch typ {
	case wasmabi.F64:
		switch rapid.IntRange(0, 9).Draw(t, name+".kind") {
		case 0:
			return math.Float64bits(rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1, 1e6, 1e6 + 1,
				math.SmallestNonzeroFloat64, 1e-300, 0.999999, 1, 1000, 1000.0001, float64(core.MaxCount)}).Draw(t, name))
		case 1:
			return rapid.Uint64().Draw(t, name)
		case 2:
			return math.Float64bits(rapid.Float64().Draw(t, name))
		case 3, 4:
			return math.Float64bits(rapid.Float64Range(0, 1).Draw(t, name))
		}
		return math.Float64bits(rapid.Float64Range(1, 50).Draw(t, name))
	case wasmabi.I32:
		switch rapid.IntRange(0, 5).Draw(t, name+".kind") {
		case 0:
			return api.EncodeI32(rapid.Int32().Draw(t, name))
		case 1:
			return api.EncodeI32(rapid.SampledFrom([]int32{-1, 0, 1, 2, 3, 4, 5, wasmabi.MaxBloomK, wasmabi.MaxBloomK + 1, 1 << 16, 1<<16 + 1}).Draw(t, name))
		}
		return api.EncodeI32(rapid.Int32Range(0, 24).Draw(t, name))
	}
	switch rapid.IntRange(0, 9).Draw(t, name+".kind") {
	case 0:
		return rapid.Uint64().Draw(t, name)
	case 1:
		return uint64(rapid.SampledFrom([]int64{-1, 0, 1, core.MaxTime, core.MaxTime + 1, core.MaxDuration, core.MaxDuration + 1,
			core.MaxCount, core.MaxCount + 1, math.MaxInt64, math.MinInt64, 1 << 32, 1<<32 + 1}).Draw(t, name))
	case 2, 3:
		return uint64(rapid.Int64Range(0, 40).Draw(t, name))
	case 4, 5:
		return uint64(rapid.Int64Range(1, 5*core.Second).Draw(t, name))
	}
	return uint64(1767225600000000 + rapid.Int64Range(-10*core.Second, 10*core.Second).Draw(t, name))
}

// TestExportsMatchNative calls every step export with drawn arguments (valid and invalid,
// at least 1000 cases each) in the module and natively, and requires the same status, the
// same result slots and the same buffer output. A trap fails the test: bad input must come
// back as a status.
func TestExportsMatchNative(t *testing.T) {
	ctx := context.Background()
	rt := testRuntime(t)
	for _, e := range wasmabi.Exports {
		if e.Direct {
			continue
		}
		t.Run(e.Name, func(t *testing.T) {
			in, err := rt.acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.release(in)
			fn := in.mod.ExportedFunction(e.Name)
			ok, cases := 0, 0
			for cases < 1000 && !t.Failed() {
				rapid.Check(t, func(rt *rapid.T) {
					cases++
					args := make([]uint64, len(e.Params))
					for i, p := range e.Params {
						args[i] = drawArg(rt, p.Type, p.Name)
					}
					// A buffer input: log timestamps or element bytes.
					input := drawInput(rt, e.Name, args)
					size := len(input)
					if e.Name == wasmabi.ExportBloomPositions {
						size = max(size, 8*int(min(max(api.DecodeI32(args[0]), 0), wasmabi.MaxBloomK)))
					}
					if e.Name == wasmabi.ExportLimitSettle && rapid.IntRange(0, 10).Draw(rt, "roomy") > 0 {
						size = max(size, 8*64) // room for the new log of a small limit
					}
					if err := in.ensure(ctx, size); err != nil {
						rt.Fatal(err)
					}
					view := in.bytes(int(in.bufLen))
					copy(view, input)
					nbuf := append([]byte(nil), view...)
					ws, wr, wout := native(e.Name, args, nbuf)

					res, err := fn.Call(ctx, args...)
					if err != nil {
						rt.Fatalf("%s%v: trap: %v", e.Name, args, err)
					}
					gs := int32(res[0])
					if gs != ws {
						rt.Fatalf("%s%s: status %d (%s), native %d (%s)", e.Name, fmtArgs(e, args), gs, wasmabi.StatusName(gs), ws, wasmabi.StatusName(ws))
					}
					if gs != wasmabi.StatusOK {
						return
					}
					ok++
					b := in.slots()
					for j := 0; j < e.Slots; j++ {
						if g := int64(binary.LittleEndian.Uint64(b[8*j:])); g != wr[j] {
							rt.Fatalf("%s%s: slot %d = %d, native %d", e.Name, fmtArgs(e, args), j, g, wr[j])
						}
					}
					if got := in.bytes(len(wout)); !bytes.Equal(got, wout) {
						rt.Fatalf("%s%s: buffer differs from native", e.Name, fmtArgs(e, args))
					}
				})
			}
			t.Logf("%s: %d cases, %d with status OK", e.Name, cases, ok)
			if ok == 0 {
				t.Errorf("%s: no case succeeded; the generator exercises only errors", e.Name)
			}
		})
	}
}

func fmtArgs(e wasmabi.Export, args []uint64) string {
	var b bytes.Buffer
	b.WriteByte('(')
	for i, p := range e.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		switch p.Type {
		case wasmabi.F64:
			fmt.Fprintf(&b, "%s=%v", p.Name, math.Float64frombits(args[i]))
		case wasmabi.I32:
			fmt.Fprintf(&b, "%s=%d", p.Name, api.DecodeI32(args[i]))
		default:
			fmt.Fprintf(&b, "%s=%d", p.Name, int64(args[i]))
		}
	}
	b.WriteByte(')')
	return b.String()
}

// drawInput draws the scratch-buffer input of an export and adjusts its length argument:
// a valid sorted log for the sliding log (sometimes corrupted), element bytes otherwise.
func drawInput(t *rapid.T, name string, args []uint64) []byte {
	switch name {
	case wasmabi.ExportLeaseRelease, wasmabi.ExportLeaseExtend:
		if rapid.Bool().Draw(t, "valid") {
			// A concurrency limit and a log holding a lease, so that releases and extensions
			// succeed often.
			alg := 0
			for i, a := range core.Algorithms() {
				if a.Name == "concurrency" {
					alg = i
				}
			}
			at := int64(1767225600000000) + rapid.Int64Range(0, core.Second).Draw(t, "valid.at")
			k := rapid.IntRange(1, 10).Draw(t, "valid.held")
			b := make([]byte, 8*k)
			for i := range k {
				binary.LittleEndian.PutUint64(b[8*i:], uint64(at))
			}
			args[0], args[1], args[2] = api.EncodeI32(int32(alg)), 0, 0
			args[3], args[4], args[5] = uint64(core.Second), 10, api.EncodeI32(int32(k))
			args[6], args[7] = uint64(at), uint64(at+rapid.Int64Range(0, 2*core.Second).Draw(t, "valid.age"))
			args[8] = uint64(rapid.Int64Range(1, int64(k)+1).Draw(t, "valid.n"))
			return b
		}
		n := rapid.IntRange(0, 12).Draw(t, "loglen")
		ts := int64(1767225600000000) + rapid.Int64Range(-core.Second, core.Second).Draw(t, "logstart")
		b := make([]byte, 8*n)
		for i := 0; i < n; i++ {
			ts += rapid.Int64Range(0, 3).Draw(t, "logdt") * core.Millisecond
			binary.LittleEndian.PutUint64(b[8*i:], uint64(ts))
		}
		if rapid.IntRange(0, 10).Draw(t, "keeplen") > 0 {
			args[5] = api.EncodeI32(int32(n))
		}
		return b
	case wasmabi.ExportLimitSeed:
		if rapid.Bool().Draw(t, "valid") {
			// Two limits of one algorithm (the window shape's with one window) and a state
			// a step could leave, so that seeds succeed often.
			algs := core.Algorithms()
			alg := rapid.IntRange(0, len(algs)-1).Draw(t, "valid.alg")
			now := int64(1767225600000000) + rapid.Int64Range(0, core.Second).Draw(t, "valid.now")
			args[0], args[5] = api.EncodeI32(int32(alg)), api.EncodeI32(int32(alg))
			args[1], args[2] = math.Float64bits(float64(rapid.IntRange(1, 30).Draw(t, "valid.capacity"))), math.Float64bits(float64(rapid.IntRange(1, 30).Draw(t, "valid.rate")))
			args[6], args[7] = math.Float64bits(float64(rapid.IntRange(1, 30).Draw(t, "valid.fcapacity"))), math.Float64bits(float64(rapid.IntRange(1, 30).Draw(t, "valid.frate")))
			args[3], args[8] = uint64(core.Second), uint64(core.Second)
			args[4], args[9] = uint64(rapid.Int64Range(1, 30).Draw(t, "valid.limit")), uint64(rapid.Int64Range(1, 30).Draw(t, "valid.flimit"))
			args[10], args[11], args[12] = 0, 0, 0
			switch algs[alg].Words {
			case 1:
				args[10] = uint64(now + rapid.Int64Range(-core.Second, core.Second).Draw(t, "valid.tat"))
			case 2, 3:
				args[10] = uint64(now - now%core.Second)
				args[11] = uint64(rapid.Int64Range(0, 30).Draw(t, "valid.count"))
				if algs[alg].Words == 3 {
					args[12] = uint64(rapid.Int64Range(0, 30).Draw(t, "valid.prev"))
				}
			}
			args[13], args[14] = uint64(now), api.EncodeI32(int32(rapid.IntRange(0, 2).Draw(t, "valid.carry")))
		}
		return nil
	case wasmabi.ExportLimitSettle:
		if rapid.Bool().Draw(t, "valid") {
			// A valid limit, a new key and a charge, so that settlements succeed often.
			alg := rapid.IntRange(0, len(core.Algorithms())-1).Draw(t, "valid.alg")
			now := int64(1767225600000000) + rapid.Int64Range(0, core.Second).Draw(t, "valid.now")
			args[0], args[1], args[2] = api.EncodeI32(int32(alg)), math.Float64bits(10), math.Float64bits(5)
			args[3], args[4] = uint64(core.Second), 10
			args[5], args[6], args[7], args[8] = 0, 0, 0, 0
			args[9], args[10] = uint64(now-rapid.Int64Range(0, core.Second).Draw(t, "valid.age")), uint64(rapid.Int64Range(1, 10).Draw(t, "valid.charged"))
			args[11], args[12] = uint64(now), uint64(rapid.Int64Range(0, 12).Draw(t, "valid.actual"))
			return nil
		}
		fallthrough
	case wasmabi.ExportLimitStep, wasmabi.ExportLimitIdle:
		if name == wasmabi.ExportLimitStep && rapid.IntRange(0, 3).Draw(t, "validstep") == 0 {
			// A valid limit and a new key, so that steps succeed in every run.
			alg := rapid.IntRange(0, len(core.Algorithms())-1).Draw(t, "validstep.alg")
			args[0], args[1], args[2] = api.EncodeI32(int32(alg)), math.Float64bits(10), math.Float64bits(5)
			args[3], args[4] = uint64(core.Second), 10
			args[5], args[6], args[7], args[8] = 0, 0, 0, 0
			args[9] = uint64(int64(1767225600000000) + rapid.Int64Range(0, core.Second).Draw(t, "validstep.now"))
			args[10] = uint64(rapid.Int64Range(1, 10).Draw(t, "validstep.n"))
			return nil
		}
		n := rapid.IntRange(0, 30).Draw(t, "loglen")
		ts := int64(1767225600000000) + rapid.Int64Range(-10*core.Second, 10*core.Second).Draw(t, "logstart")
		b := make([]byte, 8*n)
		for i := 0; i < n; i++ {
			ts += rapid.Int64Range(0, core.Second).Draw(t, "logdt")
			if rapid.IntRange(0, 50).Draw(t, "corrupt") == 0 {
				ts = rapid.Int64().Draw(t, "garbage")
			}
			binary.LittleEndian.PutUint64(b[8*i:], uint64(ts))
		}
		if rapid.IntRange(0, 10).Draw(t, "keeplen") > 0 {
			args[8] = api.EncodeI32(int32(n))
		}
		return b
	case wasmabi.ExportBloomPositions, wasmabi.ExportMurmur3:
		e := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "elem")
		l := 3
		if name == wasmabi.ExportMurmur3 {
			l = 0
		}
		if rapid.IntRange(0, 10).Draw(t, "keeplen") > 0 {
			args[l] = api.EncodeI32(int32(len(e)))
		}
		return e
	}
	return nil
}
