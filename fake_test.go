package redstream_test

import (
	"context"
	"time"

	"github.com/redstream-go/redstream"
)

// fakeLimiter returns its fields as the answer to every call. It allocates nothing.
type fakeLimiter struct {
	d   redstream.Decision
	err error
}

func (f *fakeLimiter) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return f.d, f.err
}
