package engine

import (
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// The single-limit native paths of the limits whose state is narrower than core.State,
// chosen once by NewNativeLimiter from the methods the limit has (not from its algorithm):
//
//   - a limit with StepWords (the fixed window and the sliding counter) is stepped in place
//     on the words of the key's core.State;
//   - a limit with StepInto and Idle on a *core.Log (the sliding log) on the key's log.
//
// The state stays the limiter's one core.State per key (in Limiter.one, where every other
// reader, such as a peek, finds it). Both decide a key already held with one call to the
// limit's step, under the shard lock,
// writing the decision into the shard's scratch decision (memory the lock owns, so that
// the pointer passed through the interface call does not make a stack variable escape),
// and convert it once into the caller's. A key not held and the sweep are the table's, as
// for every other limiter.

// WordsStepper is a limit whose state is the three words of core.State.Words, stepped in
// place (core.FixedWindow, core.SlidingCounter).
type WordsStepper interface {
	core.Limit
	StepWords(w *[3]int64, now, n int64, d *core.Decision) error
}

// LogStepper is a limit whose state is a core.Log (core.SlidingLog).
type LogStepper interface {
	core.Limit
	StepInto(l *core.Log, now, n int64, d *core.Decision) error
	Idle(l *core.Log, now int64) bool
}

// wordsPath is the single-limit native path of a WordsStepper, on the limiter's table.
type wordsPath struct {
	lim WordsStepper
	t   *Table[core.State]
}

func (p *wordsPath) decide(out *redstream.Decision, key string, now, n int64) error {
	s, tag := p.t.Locate(key)
	s.Lock()
	i, ok := s.Find(key, tag)
	if !ok {
		err := p.decideNew(out, s, i, key, tag, now, n)
		s.Unlock()
		return err
	}
	err := p.lim.StepWords(&s.Val(i).Words, now, n, &s.scratch)
	convert(out, &s.scratch)
	s.Unlock()
	return err
}

// decideNew decides for a key s (locked) does not hold, from the zero state, and stores
// the key when admitted.
func (p *wordsPath) decideNew(out *redstream.Decision, s *Shard[core.State], i int, key string, tag uint32, now, n int64) error {
	var v core.State
	err := p.lim.StepWords(&v.Words, now, n, &s.scratch)
	convert(out, &s.scratch)
	if err == nil && out.Allowed {
		lim := p.lim
		p.t.Insert(s, i, key, tag, v, func(v core.State) bool { return lim.IdleState(&v, now) })
	}
	return err
}

// logPath is the single-limit native path of a LogStepper, on the limiter's table.
type logPath struct {
	lim LogStepper
	t   *Table[core.State]
}

func (p *logPath) decide(out *redstream.Decision, key string, now, n int64) error {
	s, tag := p.t.Locate(key)
	s.Lock()
	i, ok := s.Find(key, tag)
	if !ok || s.Val(i).Log == nil {
		err := p.decideNew(out, s, i, ok, key, tag, now, n)
		s.Unlock()
		return err
	}
	err := p.lim.StepInto(s.Val(i).Log, now, n, &s.scratch)
	convert(out, &s.scratch)
	s.Unlock()
	return err
}

// decideNew decides for a key s (locked) does not hold (or holds without a log), from an
// empty log, and stores the key when admitted.
func (p *logPath) decideNew(out *redstream.Decision, s *Shard[core.State], i int, held bool, key string, tag uint32, now, n int64) error {
	lg := new(core.Log)
	err := p.lim.StepInto(lg, now, n, &s.scratch)
	convert(out, &s.scratch)
	if err == nil && out.Allowed {
		if held {
			s.Val(i).Log = lg
			return nil
		}
		lim := p.lim
		p.t.Insert(s, i, key, tag, core.State{Log: lg}, func(v core.State) bool { return lim.IdleState(&v, now) })
	}
	return err
}
