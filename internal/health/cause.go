package health

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/rueidis"
)

// ConnectionLevel reports whether err says the connection a call used failed, rather than
// the call: the connection was closed or reset (EOF, ECONNRESET, EPIPE, ECONNABORTED,
// net.ErrClosed, rueidis.ErrClosing, rueidis.ErrDoCacheAborted), or could not be made
// (a dial error: refused, unreachable). Every call in flight on one connection fails with
// such an error at once when the connection drops. Timeouts are not connection-level:
// each call waited its own deadline.
func ConnectionLevel(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, rueidis.ErrClosing) || errors.Is(err, rueidis.ErrDoCacheAborted) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// NodeOf returns the address of the server that err, a failure of a connection, names
// (the remote address of a *net.OpError: a refused dial, a reset read), or "".
func NodeOf(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	return ""
}

// NotSent reports whether err proves that the command of the failed call never reached
// the server, so that a call that is not idempotent may be made again: only a failed dial
// (connection refused, no route; not a dial timeout, which a retry would wait again).
// rueidis gives the calls in flight on a dropped connection its one error (EOF, a reset),
// whether their command was written or not, and a command written may have run: such
// errors prove nothing and are not retried. (rueidis retries read-only commands itself.)
func NotSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && !op.Timeout()
}
