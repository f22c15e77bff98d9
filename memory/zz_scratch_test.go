package memory

import (
	"context"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
)

var sinkI int64

func BenchmarkZStep(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	p := l.params.TokenBucket
	var tat int64
	for b.Loop() {
		tat, _, _ = p.Step(tat, 1e15, 1)
	}
	sinkI = tat
}
func BenchmarkZLocate(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	for b.Loop() {
		s, tag := l.tb.locate("user:1")
		sinkI += int64(tag) + int64(s.count)
	}
}
func BenchmarkZLockFind(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	l.Allow(context.Background(), "user:1")
	s, tag := l.tb.locate("user:1")
	for b.Loop() {
		s.mu.Lock()
		i, _ := s.find("user:1", tag)
		s.ents[i].val++
		s.mu.Unlock()
	}
}
func BenchmarkZStepTB(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	for b.Loop() {
		l.stepTokenBucket("user:1", 1e15, 1)
	}
}
func BenchmarkZAllowN(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	now := time.Unix(1e9, 0)
	ctx := context.Background()
	for b.Loop() {
		l.AllowN(ctx, "user:1", now, 1)
	}
}
func BenchmarkZMono(b *testing.B) {
	for b.Loop() {
		sinkI += monoMicros()
	}
}

func BenchmarkZLockOnly(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	s, _ := l.tb.locate("user:1")
	for b.Loop() {
		s.mu.Lock()
		s.count++
		s.mu.Unlock()
	}
}
func BenchmarkZCheckReq(b *testing.B) {
	now := time.Unix(1e9, 0)
	for b.Loop() {
		if redstream.CheckRequest("user:1", now, 1) != nil {
			b.Fatal()
		}
	}
}
