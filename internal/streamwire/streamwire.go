// Package streamwire is the wire format and key schema of package stream: the fields of a
// stream entry, the body encodings and the Redis keys of a topic, shared by stream, the
// console, the redstream command and the benchmarks. stream/WIRE.md is the document; the
// vectors in stream/testdata pin it.
package streamwire

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// The fields every entry a producer writes has, in this order (then its headers, see
// HeaderPrefix). Consumers decode by FieldEnc alone.
const (
	// FieldKey is the message's business key.
	FieldKey = "key"
	// FieldTag is the message's routing / filtering tag ("" when none).
	FieldTag = "tag"
	// FieldEnc is the body's encoding: EncPlain or EncGzip.
	FieldEnc = "enc"
	// FieldBody is the message body: JSON (EncPlain) or base64(gzip(JSON)) (EncGzip).
	FieldBody = "body"
	// FieldTS is the send time, milliseconds since the Unix epoch, in decimal.
	FieldTS = "ts"
)

// Body encodings (the values of FieldEnc).
const (
	// EncPlain: the body field is the JSON text. A missing enc field also means plain.
	EncPlain = "plain"
	// EncGzip: the body field is the standard base64 encoding (with padding) of the gzip
	// compression of the JSON text.
	EncGzip = "gzip"
)

// HeaderPrefix starts the entry field of each message header: the header "traceparent"
// travels as the field "h:traceparent". Fields without the prefix (other than the five
// contract fields) are not headers and are ignored by consumers.
const HeaderPrefix = "h:"

// ErrUndecodable is wrapped by DecodeBody's errors (stream.ErrUndecodable is this error).
var ErrUndecodable = errors.New("stream: undecodable entry")

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// EncodeBody encodes a JSON body for the wire: (EncPlain, js) or, with compress,
// (EncGzip, base64(gzip(js))). It is what producers in other languages must do.
func EncodeBody(js []byte, compress bool) (enc, body string, err error) {
	if !compress {
		return EncPlain, string(js), nil
	}
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	if _, err := zw.Write(js); err != nil {
		return "", "", fmt.Errorf("stream: gzip body: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", "", fmt.Errorf("stream: gzip body: %w", err)
	}
	gzipWriters.Put(zw)
	return EncGzip, base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// DecodeBody returns the JSON text of a body field given its enc field: "" and EncPlain are
// the text itself, EncGzip is base64 (standard alphabet; unpadded is accepted) of gzip. Any
// other enc, bad base64 or gzip, or a decompressed body larger than maxBytes, is an error
// wrapping ErrUndecodable.
func DecodeBody(enc, body string, maxBytes int) ([]byte, error) {
	switch enc {
	case "", EncPlain:
		return []byte(body), nil
	case EncGzip:
		raw, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(body, "="))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: enc=gzip: bad base64: %v", ErrUndecodable, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: enc=gzip: %v", ErrUndecodable, err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, int64(maxBytes)+1))
		if err != nil {
			return nil, fmt.Errorf("%w: enc=gzip: %v", ErrUndecodable, err)
		}
		if len(out) > maxBytes {
			return nil, fmt.Errorf("%w: enc=gzip: body larger than %d bytes", ErrUndecodable, maxBytes)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown enc %q", ErrUndecodable, enc)
}

// EncodeFields encodes entry fields for the schedule's hash: for each name and value,
// "<byte length>:<bytes>" (delay_move.lua decodes it).
func EncodeFields(fields []string) string {
	n := 0
	for _, f := range fields {
		n += len(f) + 8
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
	}
	return string(b)
}

// DecodeFields is EncodeFields' inverse (the Go twin of delay_move.lua's decoder): the
// field names and values of a scheduled message.
func DecodeFields(s string) ([]string, error) {
	var out []string
	for pos := 0; pos < len(s); {
		colon := -1
		for i := pos; i < len(s) && i-pos <= 12; i++ {
			if s[i] == ':' {
				colon = i
				break
			}
		}
		if colon <= pos {
			return nil, fmt.Errorf("stream: scheduled entry: no length at byte %d", pos)
		}
		digits := s[pos:colon]
		n, err := strconv.Atoi(digits)
		if err != nil || strings.Trim(digits, "0123456789") != "" || colon+1+n > len(s) {
			return nil, fmt.Errorf("stream: scheduled entry: bad length %q at byte %d", s[pos:colon], pos)
		}
		out = append(out, s[colon+1:colon+1+n])
		pos = colon + 1 + n
	}
	if len(out) == 0 || len(out)%2 != 0 {
		return nil, fmt.Errorf("stream: scheduled entry: %d strings, want a non-zero even number", len(out))
	}
	return out, nil
}
