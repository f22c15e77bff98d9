package memory

import (
	"context"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
)

func BenchmarkScratchAllow(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(ctx, "user:12345")
	}
}
func BenchmarkScratchAllowN(b *testing.B) {
	l, _ := NewLimiter(redstream.TokenBucket(1e9, 1e6), Options{})
	ctx := context.Background()
	now := time.Unix(1e9, 0)
	b.ReportAllocs()
	for b.Loop() {
		l.AllowN(ctx, "user:12345", now, 1)
	}
}
func BenchmarkScratchNow(b *testing.B) {
	for b.Loop() {
		_ = time.Now().UnixMicro()
	}
}
