package stream

import (
	"fmt"
	"sync"
)

// workQueue is where a dispatcher queues the entries in hand for Handle: to the handler's
// own workers (ownWorkers), or to its share of a pool of workers several handler runtimes
// share, served by weight or strictly (poolShare: Handler.Pool, and the levels of a topic
// with priorities).
type workQueue interface {
	// start starts serving the queue: run handles one job.
	start(run func(j job))
	// put queues j; it never blocks: the dispatcher queues at most its capacity.
	put(j job)
	// tryPut queues j unless capacity jobs are queued already.
	tryPut(j job) bool
	// close ends the queue: nothing more is put, what is queued is still handled.
	close()
	// wait returns once the queue is closed and every job queued has been handled.
	wait()
}

// ownWorkers is a handler's own workers: a channel of capacity jobs and n goroutines.
type ownWorkers struct {
	n       int
	ch      chan job
	workers sync.WaitGroup
}

func newOwnWorkers(n, capacity int) *ownWorkers {
	return &ownWorkers{n: n, ch: make(chan job, capacity)}
}

func (w *ownWorkers) start(run func(j job)) {
	w.workers.Add(w.n)
	for range w.n {
		go func() {
			defer w.workers.Done()
			for j := range w.ch {
				run(j)
			}
		}()
	}
}

func (w *ownWorkers) put(j job) { w.ch <- j }

func (w *ownWorkers) tryPut(j job) bool {
	select {
	case w.ch <- j:
		return true
	default:
		return false
	}
}

func (w *ownWorkers) close() { close(w.ch) }

func (w *ownWorkers) wait() { w.workers.Wait() }

// Pool is a set of handler goroutines shared by several handlers (Handler.Pool), such as
// the handlers of several topics a service consumes, so that their messages are handled in
// proportion to their weights (Handler.Weight) instead of each handler running its own
// Concurrency goroutines. Whenever a goroutine of the pool is free, it takes the next
// message from the handlers that have messages in hand waiting: in weighted mode the
// handler that is most behind its share (smooth weighted round robin: over any run of
// picks while handlers wait, each gets its weight's share, up to one message, and a
// handler of weight 1 is never starved by heavier ones); in strict mode the waiting
// handler of the largest weight, so a lighter handler waits while a heavier one has work
// (it can starve). A handler with nothing waiting takes nothing from the others' shares.
//
// Each handler still reads, leases, retries and acknowledges on its own; its Concurrency
// then only sizes how many entries it holds in hand (Concurrency + Config.ReadCount), and
// the pool's concurrency bounds the Handle calls of all its handlers together. A Pool is
// safe for concurrent use and may serve the handlers of several Consumers; its goroutines
// run while at least one of its handlers runs.
type Pool struct {
	concurrency int
	strict      bool

	mu      sync.Mutex
	cond    *sync.Cond
	members []*poolShare
	open    int // shares started and not done
	running int // goroutines running
}

// maxPoolConcurrency bounds NewPool's concurrency, as Handler.Concurrency is bounded.
const maxPoolConcurrency = maxConcurrency

// NewPool returns a pool of concurrency goroutines (1 to 10,000), serving its handlers by
// weight, or strictly by weight when strict is true. It returns an error wrapping
// redstream.ErrInvalidConfig for a concurrency out of range.
func NewPool(concurrency int, strict bool) (*Pool, error) {
	if concurrency < 1 || concurrency > maxPoolConcurrency {
		return nil, errInvalid("NewPool: concurrency %d: want 1 to %d", concurrency, maxPoolConcurrency)
	}
	return newPool(concurrency, strict), nil
}

func newPool(concurrency int, strict bool) *Pool {
	p := &Pool{concurrency: concurrency, strict: strict}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// poolShare is one handler runtime's queue in a Pool.
type poolShare struct {
	p        *Pool
	name     string // topic/group, for the panic of a misuse
	weight   int
	capacity int
	run      func(j job)
	queue    []job
	current  int // smooth weighted round robin's running score
	started  bool
	closed   bool
	inflight int
	done     chan struct{}
}

// share returns a new share of p of weight (at least 1) for a runtime holding at most
// capacity jobs.
func (p *Pool) share(name string, weight, capacity int) *poolShare {
	return &poolShare{p: p, name: name, weight: weight, capacity: capacity, done: make(chan struct{})}
}

func (s *poolShare) start(run func(j job)) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.started {
		panic(fmt.Sprintf("stream: pool share of %s started twice", s.name))
	}
	s.started, s.run = true, run
	p.members = append(p.members, s)
	p.open++
	for p.running < p.concurrency {
		p.running++
		go p.worker()
	}
}

func (s *poolShare) put(j job) {
	p := s.p
	p.mu.Lock()
	s.queue = append(s.queue, j)
	p.mu.Unlock()
	p.cond.Signal()
}

func (s *poolShare) tryPut(j job) bool {
	p := s.p
	p.mu.Lock()
	ok := len(s.queue) < s.capacity
	if ok {
		s.queue = append(s.queue, j)
	}
	p.mu.Unlock()
	if ok {
		p.cond.Signal()
	}
	return ok
}

func (s *poolShare) close() {
	p := s.p
	p.mu.Lock()
	s.closed = true
	if !s.started {
		close(s.done) // never started: nothing was queued
	} else {
		s.finishLocked()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// finishLocked marks s done once it is closed with nothing queued or running; p.mu is held.
func (s *poolShare) finishLocked() {
	p := s.p
	if !s.closed || len(s.queue) > 0 || s.inflight > 0 {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	for i, m := range p.members {
		if m == s {
			p.members = append(p.members[:i], p.members[i+1:]...)
			break
		}
	}
	p.open--
}

func (s *poolShare) wait() { <-s.done }

// next picks the share to serve next among those with jobs queued, or nil; p.mu is held.
func (p *Pool) next() *poolShare {
	var best *poolShare
	total := 0
	for _, m := range p.members {
		if len(m.queue) == 0 {
			continue
		}
		if p.strict {
			if best == nil || m.weight > best.weight {
				best = m
			}
			continue
		}
		m.current += m.weight
		total += m.weight
		if best == nil || m.current > best.current {
			best = m
		}
	}
	if best != nil && !p.strict {
		best.current -= total
	}
	if p.strict && best != nil {
		// Round robin among the shares of the largest weight: the one served goes last.
		for i, m := range p.members {
			if m == best {
				p.members = append(append(p.members[:i:i], p.members[i+1:]...), m)
				break
			}
		}
	}
	return best
}

// worker serves the pool's shares until none is open.
func (p *Pool) worker() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		s := p.next()
		for s == nil {
			if p.open == 0 {
				p.running--
				return
			}
			p.cond.Wait()
			s = p.next()
		}
		j := s.queue[0]
		s.queue[0] = job{}
		s.queue = s.queue[1:]
		s.inflight++
		p.mu.Unlock()
		s.run(j)
		p.mu.Lock()
		s.inflight--
		s.finishLocked()
		if p.open == 0 {
			p.cond.Broadcast() // the other goroutines exit too
		}
	}
}
