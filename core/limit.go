package core

// Limit is one rate limit, whatever its algorithm: the five limiters of this package
// implement it, so an engine holds a []Limit and needs no switch over the algorithm set.
//
// A decision is two halves, so that several limits can be applied all-or-nothing:
// CheckState decides a request without changing the key's state and returns the words to
// store; CommitState stores them once every limit of the request admitted it. A
// single-limit engine commits right after an admitting check. Both are pure functions of
// their arguments, as the algorithms' own Step methods are (which they call).
//
// The state of one key is a [State], the shape the WebAssembly ABI passes: up to three
// words and, for the sliding log, the log. The zero State is a new key.
type Limit interface {
	// Name is the algorithm's name, as in configuration files: "token-bucket",
	// "leaky-bucket", "sliding", "sliding-counter" or "fixed".
	Name() string
	// Max is the most cost one key can admit at once, the Limit of every decision: the
	// bucket's burst or the window's limit. A cost above it is ErrCostTooLarge.
	Max() int64
	// Period is the time (µs) over which Max is granted: the window of the window
	// algorithms, and for the buckets the time to earn a full burst back.
	Period() int64
	// Ints returns the integer parameters, in the order the Lua scripts take them after now
	// and n: interval, tolerance and burst for the buckets, window and limit for the
	// windows.
	Ints() []int64
	// CheckState decides a request of cost n at now for a key in state s, without changing
	// s. When the decision admits, next is what CommitState must store.
	CheckState(s *State, now, n int64) (d Decision, next Next, err error)
	// CommitState records an admitted request in s: next is what CheckState returned.
	CommitState(s *State, next Next)
	// StepState is CheckState followed, when the decision admits, by CommitState: the one
	// call a single-limit engine makes.
	StepState(s *State, now, n int64) (Decision, error)
	// IdleState reports whether a key in state s is back to its initial state at now, so
	// that an engine may forget it.
	IdleState(s *State, now int64) bool
}

// State is the state of one key under one Limit. Words holds the TAT of a bucket (Words[0])
// or the start, count and previous count of a window; Log is the sliding log's (nil until
// the first admitted request). The zero value is a new key.
type State struct {
	Words [3]int64
	Log   *Log
}

// Next is what CommitState stores: the state words of the buckets and windows, and for the
// sliding log how the log changes (drop the oldest Next[0] entries, then append Next[1]
// entries at time Next[2]). These are the WebAssembly ABI's three state result slots.
type Next [3]int64

var (
	_ Limit = TokenBucket{}
	_ Limit = LeakyBucket{}
	_ Limit = FixedWindow{}
	_ Limit = SlidingCounter{}
	_ Limit = SlidingLog{}
)

// Name returns "token-bucket".
func (b TokenBucket) Name() string { return "token-bucket" }

// Name returns "leaky-bucket".
func (b LeakyBucket) Name() string { return "leaky-bucket" }

// Max returns the burst.
func (g GCRA) Max() int64 { return g.Burst }

// Period returns Burst × Interval, the time to earn a full burst back.
func (g GCRA) Period() int64 { return g.Burst * g.Interval }

// Ints returns interval, tolerance and burst.
func (g GCRA) Ints() []int64 { return []int64{g.Interval, g.Tolerance, g.Burst} }

// CheckState is Step on s.Words[0], the TAT.
func (b TokenBucket) CheckState(s *State, now, n int64) (Decision, Next, error) {
	tat, d, err := b.Decide(s.Words[0], now, n, false)
	return d, Next{tat}, err
}

// CheckState is Step on s.Words[0], the TAT.
func (b LeakyBucket) CheckState(s *State, now, n int64) (Decision, Next, error) {
	tat, d, err := b.Decide(s.Words[0], now, n, true)
	return d, Next{tat}, err
}

// CommitState stores the TAT.
func (g GCRA) CommitState(s *State, next Next) { s.Words[0] = next[0] }

// StepState is Step on s.Words[0], the TAT.
func (b TokenBucket) StepState(s *State, now, n int64) (Decision, error) {
	tat, d, err := b.Decide(s.Words[0], now, n, false)
	s.Words[0] = tat
	return d, err
}

// StepState is Step on s.Words[0], the TAT.
func (b LeakyBucket) StepState(s *State, now, n int64) (Decision, error) {
	tat, d, err := b.Decide(s.Words[0], now, n, true)
	s.Words[0] = tat
	return d, err
}

// IdleState is Idle on the TAT.
func (g GCRA) IdleState(s *State, now int64) bool { return g.Idle(s.Words[0], now) }

func windowOf(s *State) WindowState {
	return WindowState{Start: s.Words[0], Count: s.Words[1], Prev: s.Words[2]}
}

func (w WindowState) next() Next { return Next{w.Start, w.Count, w.Prev} }

// Name returns "fixed".
func (p FixedWindow) Name() string { return "fixed" }

// Max returns the limit.
func (p FixedWindow) Max() int64 { return p.Limit }

// Period returns the window.
func (p FixedWindow) Period() int64 { return p.Window }

// Ints returns window and limit.
func (p FixedWindow) Ints() []int64 { return []int64{p.Window, p.Limit} }

// CheckState is Step on the window state held in s.Words.
func (p FixedWindow) CheckState(s *State, now, n int64) (Decision, Next, error) {
	w, d, err := p.Step(windowOf(s), now, n)
	return d, w.next(), err
}

// CommitState stores the window state.
func (p FixedWindow) CommitState(s *State, next Next) { s.Words = next }

// StepState is Step on the window state held in s.Words.
func (p FixedWindow) StepState(s *State, now, n int64) (Decision, error) {
	var d Decision
	err := p.step(&s.Words, now, n, &d)
	return d, err
}

// IdleState is Idle on the window state held in s.Words.
func (p FixedWindow) IdleState(s *State, now int64) bool { return p.Idle(windowOf(s), now) }

// Name returns "sliding-counter".
func (p SlidingCounter) Name() string { return "sliding-counter" }

// Max returns the limit.
func (p SlidingCounter) Max() int64 { return p.Limit }

// Period returns the window.
func (p SlidingCounter) Period() int64 { return p.Window }

// Ints returns window and limit.
func (p SlidingCounter) Ints() []int64 { return []int64{p.Window, p.Limit} }

// CheckState is Step on the window state held in s.Words.
func (p SlidingCounter) CheckState(s *State, now, n int64) (Decision, Next, error) {
	w, d, err := p.Step(windowOf(s), now, n)
	return d, w.next(), err
}

// CommitState stores the window state.
func (p SlidingCounter) CommitState(s *State, next Next) { s.Words = next }

// StepState is Step on the window state held in s.Words.
func (p SlidingCounter) StepState(s *State, now, n int64) (Decision, error) {
	var d Decision
	err := p.step(&s.Words, now, n, &d)
	return d, err
}

// IdleState is Idle on the window state held in s.Words.
func (p SlidingCounter) IdleState(s *State, now int64) bool { return p.Idle(windowOf(s), now) }

// Name returns "sliding".
func (p SlidingLog) Name() string { return "sliding" }

// Max returns the limit.
func (p SlidingLog) Max() int64 { return p.Limit }

// Period returns the window.
func (p SlidingLog) Period() int64 { return p.Window }

// Ints returns window and limit.
func (p SlidingLog) Ints() []int64 { return []int64{p.Window, p.Limit} }

var emptyLog Log

// CheckState is Check on s.Log. When it admits, next says what Record would do: drop the
// next[0] oldest entries (those expired at the effective time), then append n entries at
// next[2] (now, or the newest entry's time if later).
func (p SlidingLog) CheckState(s *State, now, n int64) (Decision, Next, error) {
	l := s.Log
	if l == nil {
		l = &emptyLog
	}
	d, err := p.Check(l, now, n)
	if err != nil || !d.Allowed {
		return d, Next{}, err
	}
	eff := p.effective(l, now)
	return d, Next{int64(l.firstLive(eff - p.Window)), n, eff}, nil
}

// CommitState applies next to s.Log, creating it for a new key.
func (p SlidingLog) CommitState(s *State, next Next) {
	if s.Log == nil {
		s.Log = new(Log)
	}
	l := s.Log
	for i := int64(0); i < next[0] && l.n > 0; i++ {
		l.popOldest()
	}
	for i := int64(0); i < next[1]; i++ {
		l.push(next[2], p.Limit)
	}
}

// StepState is Step on s.Log, creating it for a new key's first admitted request.
func (p SlidingLog) StepState(s *State, now, n int64) (Decision, error) {
	if s.Log == nil {
		d, next, err := p.CheckState(s, now, n)
		if err == nil && d.Allowed {
			p.CommitState(s, next)
		}
		return d, err
	}
	return p.Step(s.Log, now, n)
}

// IdleState is Idle on s.Log.
func (p SlidingLog) IdleState(s *State, now int64) bool {
	return s.Log == nil || p.Idle(s.Log, now)
}
