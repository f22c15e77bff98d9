package wasmcore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi/wasmvec"
)

const vectorsPath = "../examples/node/vectors.json"

// TestVectorsUpToDate checks that the committed vector file is what the generator writes.
func TestVectorsUpToDate(t *testing.T) {
	want, err := wasmvec.VectorsJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: run cd wasmcore && go generate ./...", vectorsPath)
	}
}

// TestVectors runs every vector against the module under wazero, as the Node.js runner does.
func TestVectors(t *testing.T) {
	ctx := context.Background()
	rt := testRuntime(t)
	in, err := rt.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.release(in)
	f := wasmvec.Vectors()
	types := map[string][]string{}
	for _, e := range f.Exports {
		types[e.Name] = e.Types
	}
	if len(f.Cases) < 500 {
		t.Fatalf("only %d vectors", len(f.Cases))
	}
	perExport := map[string]int{}
	for i, c := range f.Cases {
		fn := in.mod.ExportedFunction(c.Export)
		if fn == nil {
			t.Fatalf("case %d: no export %s", i, c.Export)
		}
		input, _ := hex.DecodeString(c.Input)
		output, _ := hex.DecodeString(c.Output)
		if err := in.ensure(ctx, max(len(input), len(output))); err != nil {
			t.Fatal(err)
		}
		copy(in.bytes(len(input)), input)
		args := make([]uint64, len(c.Args))
		for j, a := range c.Args {
			switch types[c.Export][j] {
			case "f64":
				v, err := wasmvec.ParseF64(a)
				if err != nil {
					t.Fatal(err)
				}
				args[j] = math.Float64bits(v)
			case "i32":
				v, err := strconv.ParseInt(a, 10, 32)
				if err != nil {
					t.Fatal(err)
				}
				args[j] = api.EncodeI32(int32(v))
			default:
				v, err := strconv.ParseInt(a, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				args[j] = uint64(v)
			}
		}
		res, err := fn.Call(ctx, args...)
		if err != nil {
			t.Fatalf("case %d %s%v: trap: %v", i, c.Export, c.Args, err)
		}
		if got := int32(res[0]); got != c.Status {
			t.Errorf("case %d %s%v: status %d, want %d", i, c.Export, c.Args, got, c.Status)
			continue
		}
		perExport[c.Export]++
		b := in.slots()
		for j, w := range c.Results {
			if got := strconv.FormatInt(int64(binary.LittleEndian.Uint64(b[8*j:])), 10); got != w {
				t.Errorf("case %d %s%v: slot %d = %s, want %s", i, c.Export, c.Args, j, got, w)
			}
		}
		if len(output) > 0 && !bytes.Equal(in.bytes(len(output)), output) {
			t.Errorf("case %d %s%v: output %x, want %x", i, c.Export, c.Args, in.bytes(len(output)), output)
		}
	}
	for _, e := range wasmabi.Exports {
		if !e.Direct && perExport[e.Name] == 0 {
			t.Errorf("no vector for %s", e.Name)
		}
	}
}
