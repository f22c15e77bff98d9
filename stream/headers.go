package stream

import (
	"errors"
	"fmt"
	"github.com/redstream-go/redstream/internal/streamwire"
	"strings"
	"unicode/utf8"
)

// headerPrefix starts the entry field of each message header (streamwire.HeaderPrefix).
const headerPrefix = streamwire.HeaderPrefix

// Header limits, checked by validateHeaders on every send.
const (
	// maxHeaders is the most headers one message may carry.
	maxHeaders = 64
	// maxHeaderNameBytes is the longest header name, in bytes.
	maxHeaderNameBytes = 256
	// maxHeaderBytes bounds the total size of one message's header names and values, in
	// bytes.
	maxHeaderBytes = 64 << 10
)

// ErrInvalidHeader is returned (wrapped, with the offending header named) by Send for a
// header that breaks the limits of Message.Headers.
var ErrInvalidHeader = errors.New("stream: invalid header")

// validateHeaders checks headers as Send does: at most maxHeaders headers; each name of 1
// to maxHeaderNameBytes bytes of printable ASCII other than space (0x21-0x7E), so that it
// is a clean field name in every client library; each value valid UTF-8; names and values
// together at most maxHeaderBytes bytes. A nil or empty map is valid. The error wraps
// ErrInvalidHeader.
func validateHeaders(headers map[string]string) error {
	if len(headers) > maxHeaders {
		return fmt.Errorf("%w: %d headers, at most %d", ErrInvalidHeader, len(headers), maxHeaders)
	}
	total := 0
	for n, v := range headers {
		if n == "" {
			return fmt.Errorf("%w: empty name", ErrInvalidHeader)
		}
		if len(n) > maxHeaderNameBytes {
			return fmt.Errorf("%w: name %.32q... is %d bytes, at most %d", ErrInvalidHeader, n, len(n), maxHeaderNameBytes)
		}
		for i := 0; i < len(n); i++ {
			if c := n[i]; c < 0x21 || c > 0x7e {
				return fmt.Errorf("%w: name %q: byte %#02x at %d is not printable ASCII (0x21-0x7E)", ErrInvalidHeader, n, c, i)
			}
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: value of %q is not valid UTF-8", ErrInvalidHeader, n)
		}
		total += len(n) + len(v)
	}
	if total > maxHeaderBytes {
		return fmt.Errorf("%w: %d bytes of names and values, at most %d", ErrInvalidHeader, total, maxHeaderBytes)
	}
	return nil
}

// decodeHeaders returns the headers among an entry's fields (name, value, ...): every field
// named headerPrefix + a non-empty name. Nil when there are none. A consumer takes what the
// entry holds without the send-side limits (the entry is already in memory; rejecting it
// would only turn a foreign producer's message into poison).
func decodeHeaders(fields []string) map[string]string {
	var h map[string]string
	for i := 0; i+1 < len(fields); i += 2 {
		name, ok := strings.CutPrefix(fields[i], headerPrefix)
		if !ok || name == "" {
			continue
		}
		if h == nil {
			h = make(map[string]string, 4)
		}
		h[name] = fields[i+1]
	}
	return h
}

// Headers returns the dead letter's message headers (its "h:<name>" fields), nil when it
// has none.
func (d DeadLetter) Headers() map[string]string {
	var h map[string]string
	for k, v := range d.Fields {
		if name, ok := strings.CutPrefix(k, headerPrefix); ok && name != "" {
			if h == nil {
				h = make(map[string]string, 4)
			}
			h[name] = v
		}
	}
	return h
}
