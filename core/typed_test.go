package core

// Typed views of the registry's limits for the tests of this package, in the shapes the
// algorithms' own state takes (a TAT, the window words, a log).

// WindowState is the window algorithms' state in the tests.
type WindowState = windowState

func mustNew(name string, p Params) (Limit, error) {
	a, err := Lookup(name)
	if err != nil {
		panic(err)
	}
	return a.New(p)
}

type bucketT struct {
	Limit
	Interval, Burst int64
}

func (b bucketT) Step(tat, now, n int64) (int64, Decision, error) {
	s := State{Words: [3]int64{tat}}
	var d Decision
	err := b.StepState(&s, now, n, &d)
	return s.Words[0], d, err
}

func NewTokenBucket(capacity, rate float64) (bucketT, error) {
	l, err := mustNew("token-bucket", Params{Capacity: capacity, Rate: rate})
	if err != nil {
		return bucketT{}, err
	}
	return bucketT{l, l.ints()[0], l.Max()}, nil
}

func NewLeakyBucket(capacity, rate float64) (bucketT, error) {
	l, err := mustNew("leaky-bucket", Params{Capacity: capacity, Rate: rate})
	if err != nil {
		return bucketT{}, err
	}
	return bucketT{l, l.ints()[0], l.Max()}, nil
}

type windowT struct {
	lim   Limit
	Limit int64
}

func (w windowT) Step(s WindowState, now, n int64) (WindowState, Decision, error) {
	st := State{Words: [3]int64{s.Start, s.Count, s.Prev}}
	var d Decision
	err := w.lim.StepState(&st, now, n, &d)
	return WindowState{st.Words[0], st.Words[1], st.Words[2]}, d, err
}

func newWindowT(name string, window, limit int64) (windowT, error) {
	l, err := mustNew(name, Params{Window: window, Limit: limit})
	if err != nil {
		return windowT{}, err
	}
	return windowT{l, limit}, nil
}

func NewFixedWindow(window, limit int64) (windowT, error) {
	return newWindowT("fixed", window, limit)
}

func NewSlidingCounter(window, limit int64) (windowT, error) {
	return newWindowT("sliding-counter", window, limit)
}

type logT struct {
	lim   Limit
	Limit int64
}

func (p logT) Step(l *Log, now, n int64) (Decision, error) {
	s := State{Log: l}
	var d Decision
	err := p.lim.StepState(&s, now, n, &d)
	return d, err
}

func NewSlidingLog(window, limit int64) (logT, error) {
	l, err := mustNew("sliding", Params{Window: window, Limit: limit})
	if err != nil {
		return logT{}, err
	}
	return logT{l, limit}, nil
}

func (l *Log) Newest() int64 { return l.newest() }
