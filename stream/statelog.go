package stream

import (
	"log/slog"
	"sync"
	"time"
)

// opState tracks whether one kind of background work (reads, acks, scans...) is failing, so
// that it is logged once when it starts failing and once when it works again, never once
// per attempt.
type opState struct {
	mu       sync.Mutex
	failing  bool
	since    time.Time
	failures int
}

// fail records a failure; the first of a run is logged at Warn.
func (s *opState) fail(log *slog.Logger, msg string, err error, attrs ...any) {
	s.mu.Lock()
	first := !s.failing
	if first {
		s.failing, s.since, s.failures = true, time.Now(), 0
	}
	s.failures++
	s.mu.Unlock()
	if first {
		log.Warn(msg, append(attrs, "error", err)...)
	}
}

// ok records a success; the first after failures is logged at Info.
func (s *opState) ok(log *slog.Logger, msg string, attrs ...any) {
	s.mu.Lock()
	was, since, n := s.failing, s.since, s.failures
	s.failing = false
	s.mu.Unlock()
	if was {
		log.Info(msg, append(attrs, "failures", n, "after", time.Since(since).Round(time.Millisecond))...)
	}
}

// isFailing reports whether the last attempt failed.
func (s *opState) isFailing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failing
}
