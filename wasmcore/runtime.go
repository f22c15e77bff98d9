package wasmcore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/redstream-go/redstream/internal/wasmabi"
)

// MaxInstances is the largest accepted Config.Instances.
const MaxInstances = 1024

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
	// are created on first use. At most MaxInstances. Default runtime.GOMAXPROCS(0).
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
	pool     chan *instance
	size     int
	closed   atomic.Bool
	done     chan struct{}
	once     sync.Once

	// replaced counts instances closed after a trap or a misbehaviour (for tests and
	// monitoring).
	replaced atomic.Int64
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
	if n < 1 || n > MaxInstances {
		return nil, fmt.Errorf("wasmcore: %w: Instances = %d, want in [1, %d]", errInvalidConfig, cfg.Instances, MaxInstances)
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
	r := &Runtime{rt: rt, compiled: compiled, pool: make(chan *instance, n), size: n, done: make(chan struct{})}
	first, err := r.instantiate(ctx)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	r.pool <- first
	for i := 1; i < n; i++ {
		r.pool <- nil // created on first use
	}
	return r, nil
}

// Instances returns the size of the pool.
func (r *Runtime) Instances() int { return r.size }

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

// acquire takes an instance from the pool, creating it if its slot is empty. The caller
// must give it back with release.
func (r *Runtime) acquire(ctx context.Context) (*instance, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	var in *instance
	select {
	case in = <-r.pool:
	default:
		select {
		case in = <-r.pool:
		case <-r.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("wasmcore: waiting for an instance: %w", ctx.Err())
		}
	}
	if in != nil {
		return in, nil
	}
	in, err := r.instantiate(ctx)
	if err != nil {
		r.pool <- nil
		if r.closed.Load() {
			return nil, ErrClosed
		}
		return nil, err
	}
	return in, nil
}

// release gives an instance back to the pool. A broken instance is closed and its slot
// left empty, so the next acquire creates a fresh instance.
func (r *Runtime) release(in *instance) {
	if in.broken {
		r.replaced.Add(1)
		_ = in.mod.Close(context.Background())
		in = nil
	}
	r.pool <- in
}
