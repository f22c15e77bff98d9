package health

import (
	"sync"
	"sync/atomic"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream"
)

// RegisterGauge exports state, the state of a circuit breaker, as the gauge series (a
// metric name with its labels) in set: 0 closed, 1 half-open, 2 open. Registering again
// under the same set and series replaces the state the gauge reads (the component built
// last wins), so a component re-created under its name is followed. It is safe for
// concurrent use.
func RegisterGauge(set *vm.Set, series string, state func() redstream.BreakerState) {
	if set == nil || state == nil {
		return
	}
	v, loaded := gauges.LoadOrStore(gaugeKey{set, series}, new(atomic.Pointer[func() redstream.BreakerState]))
	p := v.(*atomic.Pointer[func() redstream.BreakerState])
	p.Store(&state)
	if !loaded {
		set.GetOrCreateGauge(series, func() float64 { return float64((*p.Load())()) })
	}
}

type gaugeKey struct {
	set    *vm.Set
	series string
}

// gauges holds the state each breaker gauge reads.
var gauges sync.Map // gaugeKey -> *atomic.Pointer[func() redstream.BreakerState]
