package wasmcore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

// maxInstances is the largest accepted Config.Instances.
const maxInstances = 1024

// ErrClosed is returned by calls on a closed Runtime (and by the engines using it).
var ErrClosed = errors.New("wasmcore: runtime closed")

// ErrTrapped is wrapped by the error of a call whose instance trapped or misbehaved. The
// instance is closed and replaced by a fresh one on its next use; the call's result is lost,
// so a limiter returns a denied Decision with this error and its failure policy applies.
var ErrTrapped = errors.New("wasmcore: instance trapped")

// Config configures a Runtime. The zero value means the defaults.
type Config struct {
	// Instances is the size of the pool of module instances: the most calls into the module
	// that run at once. A wasm instance is not safe for concurrent use, so each call takes
	// one instance from the pool and gives it back; callers beyond Instances wait. Instances
	// are created on first use. At most 1024. Default runtime.GOMAXPROCS(0).
	Instances int
	// CacheDir, when set, is a directory where the compiled module is kept between
	// processes (wazero's file compilation cache), so that later processes skip
	// compilation. Default: the compiled code is kept in memory and shared by every Runtime
	// of the process, so the module is compiled once per process.
	CacheDir string
}

// Runtime is a compiled redstream core module and a fixed pool of its instances. Engines
// ([NewLimiter], [NewDeduplicator]) borrow an instance for each decision. A Runtime is safe
// for concurrent use; Close releases its instances.
type Runtime struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	slots    []poolSlot
	// waiters counts goroutines waiting for a free slot; wake carries a token to one of
	// them whenever a slot is freed while some wait.
	waiters atomic.Int32
	wake    chan struct{}
	closed  atomic.Bool
	done    chan struct{}
	once    sync.Once

	// replaced counts instances closed after a trap or a misbehaviour.
	replaced atomic.Int64
}

// poolSlot is one place of the pool: the goroutine that sets busy owns in until it clears it. A
// nil in is created by its next owner. Slots are padded so that two flags never share a
// cache line.
type poolSlot struct {
	busy atomic.Bool
	in   *instance
	_    [64 - 16]byte
}

var (
	sharedCache     wazero.CompilationCache
	sharedCacheOnce sync.Once
	dirCaches       sync.Map // dir -> wazero.CompilationCache
)

func cacheFor(dir string) (wazero.CompilationCache, error) {
	if dir == "" {
		sharedCacheOnce.Do(func() { sharedCache = wazero.NewCompilationCache() })
		return sharedCache, nil
	}
	if c, ok := dirCaches.Load(dir); ok {
		return c.(wazero.CompilationCache), nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wasmcore: compilation cache in %s: %w", dir, err)
	}
	actual, _ := dirCaches.LoadOrStore(dir, c)
	return actual.(wazero.CompilationCache), nil
}

// NewRuntime compiles the embedded module (or takes it from the compilation cache), checks
// its ABI version and exports, and creates the first instance of the pool. ctx bounds this
// work only. It returns an error wrapping redstream.ErrInvalidConfig for a bad cfg.
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	return newRuntime(ctx, cfg, module)
}

func newRuntime(ctx context.Context, cfg Config, wasm []byte) (*Runtime, error) {
	n := cfg.Instances
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if n < 1 || n > maxInstances {
		return nil, fmt.Errorf("wasmcore: %w: Instances = %d, want in [1, %d]", errInvalidConfig, cfg.Instances, maxInstances)
	}
	cache, err := cacheFor(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasmcore: instantiating WASI: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasmcore: compiling the module: %w", err)
	}
	if err := checkExports(compiled); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	r := &Runtime{rt: rt, compiled: compiled, slots: make([]poolSlot, n), wake: make(chan struct{}, n), done: make(chan struct{})}
	first, err := r.instantiate(ctx)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	first.slot, r.slots[0].in = &r.slots[0], first // the others are created on first use
	return r, nil
}

// Instances returns the size of the pool.
func (r *Runtime) Instances() int { return len(r.slots) }

// Replaced returns how many instances were closed and replaced after a trap or a
// misbehaviour since the Runtime was created.
func (r *Runtime) Replaced() int64 { return r.replaced.Load() }

// Close closes every instance and the compiled module. Calls after Close, and calls that
// were waiting for an instance, return ErrClosed. Close is idempotent.
func (r *Runtime) Close(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.done)
		err = r.rt.Close(ctx)
	})
	return err
}

var (
	defaultRuntime    *Runtime
	defaultRuntimeErr error
	defaultOnce       sync.Once
	// defaultConfig is the Config of the default Runtime (the tests point it at their
	// compilation cache).
	defaultConfig Config
)

// Default returns the process-wide Runtime used by engines whose Options.Runtime is nil. It
// is created on first use with the zero Config and never closed.
func Default() (*Runtime, error) {
	defaultOnce.Do(func() {
		defaultRuntime, defaultRuntimeErr = NewRuntime(context.Background(), defaultConfig)
	})
	return defaultRuntime, defaultRuntimeErr
}

// checkExports verifies that the module has every export of the ABI with its signature.
func checkExports(m wazero.CompiledModule) error {
	defs := m.ExportedFunctions()
	if _, ok := defs["_initialize"]; !ok {
		return errors.New("wasmcore: the module is not a WASI reactor (no _initialize export)")
	}
	for _, e := range wasmabi.Exports {
		d, ok := defs[e.Name]
		if !ok {
			return fmt.Errorf("wasmcore: the module lacks the export %s", e.Name)
		}
		pt := d.ParamTypes()
		if len(pt) != len(e.Params) {
			return fmt.Errorf("wasmcore: export %s takes %d parameters, want %d", e.Name, len(pt), len(e.Params))
		}
		for i, p := range e.Params {
			if want := valType(p.Type); pt[i] != want {
				return fmt.Errorf("wasmcore: export %s parameter %s is %s, want %s", e.Name, p.Name,
					api.ValueTypeName(pt[i]), api.ValueTypeName(want))
			}
		}
		if rt := d.ResultTypes(); len(rt) != 1 || rt[0] != api.ValueTypeI32 {
			return fmt.Errorf("wasmcore: export %s must return one i32", e.Name)
		}
	}
	return nil
}

func valType(t wasmabi.ValType) api.ValueType {
	switch t {
	case wasmabi.I64:
		return api.ValueTypeI64
	case wasmabi.F64:
		return api.ValueTypeF64
	}
	return api.ValueTypeI32
}

// acquire takes a free instance from the pool, creating it if its slot is empty, and
// waits while every instance is busy. The caller must give it back with release.
func (r *Runtime) acquire(ctx context.Context) (*instance, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	if s := r.tryAcquire(); s != nil {
		return r.fill(ctx, s)
	}
	r.waiters.Add(1)
	defer r.waiters.Add(-1)
	for {
		// A slot freed after this scan sees waiters > 0 and sends a token.
		if s := r.tryAcquire(); s != nil {
			return r.fill(ctx, s)
		}
		select {
		case <-r.wake:
		case <-r.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("wasmcore: waiting for an instance: %w", ctx.Err())
		}
	}
}

// tryAcquire claims a free slot, starting the scan at a random slot so that concurrent
// callers spread over the pool. It returns nil when every slot is busy.
func (r *Runtime) tryAcquire() *poolSlot {
	n := uint32(len(r.slots))
	start := rand.Uint32N(n)
	for i := uint32(0); i < n; i++ {
		s := &r.slots[(start+i)%n]
		if !s.busy.Load() && s.busy.CompareAndSwap(false, true) {
			return s
		}
	}
	return nil
}

// fill returns the instance of the claimed slot s, creating it if the slot is empty.
func (r *Runtime) fill(ctx context.Context, s *poolSlot) (*instance, error) {
	if s.in != nil {
		return s.in, nil
	}
	in, err := r.instantiate(ctx)
	if err != nil {
		r.free(s)
		if r.closed.Load() {
			return nil, ErrClosed
		}
		return nil, err
	}
	in.slot = s
	s.in = in
	return in, nil
}

// release gives an instance back to the pool. A broken instance is closed and its slot
// left empty, so that the slot's next owner creates a fresh instance.
func (r *Runtime) release(in *instance) {
	s := in.slot
	if in.broken {
		r.replaced.Add(1)
		_ = in.mod.Close(context.Background())
		s.in = nil
	}
	r.free(s)
}

func (r *Runtime) free(s *poolSlot) {
	s.busy.Store(false)
	if r.waiters.Load() > 0 {
		select {
		case r.wake <- struct{}{}:
		default: // tokens for every slot are pending already
		}
	}
}
