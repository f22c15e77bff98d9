package stream

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// HeaderPrefix starts the entry field of each message header: the header "traceparent"
// travels as the field "h:traceparent". Fields without the prefix (other than the five
// contract fields) are not headers and are ignored by consumers.
const HeaderPrefix = "h:"

// Header limits, checked by ValidateHeaders on every send.
const (
	// MaxHeaders is the most headers one message may carry.
	MaxHeaders = 64
	// MaxHeaderNameBytes is the longest header name, in bytes.
	MaxHeaderNameBytes = 256
	// MaxHeaderBytes bounds the total size of one message's header names and values, in
	// bytes.
	MaxHeaderBytes = 64 << 10
)

// ErrInvalidHeader is returned (wrapped, with the offending header named) by Send and
// ValidateHeaders for a header that breaks the limits.
var ErrInvalidHeader = errors.New("stream: invalid header")

// ValidateHeaders checks headers as Send does: at most MaxHeaders headers; each name of 1
// to MaxHeaderNameBytes bytes of printable ASCII other than space (0x21-0x7E), so that it
// is a clean field name in every client library; each value valid UTF-8; names and values
// together at most MaxHeaderBytes bytes. A nil or empty map is valid. The error wraps
// ErrInvalidHeader.
func ValidateHeaders(headers map[string]string) error {
	if len(headers) > MaxHeaders {
		return fmt.Errorf("%w: %d headers, at most %d", ErrInvalidHeader, len(headers), MaxHeaders)
	}
	total := 0
	for n, v := range headers {
		if n == "" {
			return fmt.Errorf("%w: empty name", ErrInvalidHeader)
		}
		if len(n) > MaxHeaderNameBytes {
			return fmt.Errorf("%w: name %.32q... is %d bytes, at most %d", ErrInvalidHeader, n, len(n), MaxHeaderNameBytes)
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
	if total > MaxHeaderBytes {
		return fmt.Errorf("%w: %d bytes of names and values, at most %d", ErrInvalidHeader, total, MaxHeaderBytes)
	}
	return nil
}

// decodeHeaders returns the headers among an entry's fields (name, value, ...): every field
// named HeaderPrefix + a non-empty name. Nil when there are none. A consumer takes what the
// entry holds without the send-side limits (the entry is already in memory; rejecting it
// would only turn a foreign producer's message into poison).
func decodeHeaders(fields []string) map[string]string {
	var h map[string]string
	for i := 0; i+1 < len(fields); i += 2 {
		name, ok := strings.CutPrefix(fields[i], HeaderPrefix)
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

// Headers returns the dead letter's message headers (its HeaderPrefix fields), nil when it
// has none.
func (d DeadLetter) Headers() map[string]string {
	var h map[string]string
	for k, v := range d.Fields {
		if name, ok := strings.CutPrefix(k, HeaderPrefix); ok && name != "" {
			if h == nil {
				h = make(map[string]string, 4)
			}
			h[name] = v
		}
	}
	return h
}
