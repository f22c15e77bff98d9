package httpidem

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/http"
)

// The stored response, the Value of an idempotency.Result, version 1:
//
//	0x01 | uvarint status | uvarint number of header names |
//	  per name: uvarint len, name, uvarint number of values, per value: uvarint len, value |
//	body (the rest)
//
// Names are sorted (each once), values in the handler's order: one encoding per response.
const storedVersion = 1

var errStored = errors.New("httpidem: malformed stored response")

// response is a handler's response, buffered.
type response struct {
	status int
	header http.Header
	body   []byte
}

// encode returns the stored form of r.
func (r *response) encode() []byte {
	names := sortedKeys(r.header)
	b := make([]byte, 0, 64+len(r.body))
	b = append(b, storedVersion)
	b = binary.AppendUvarint(b, uint64(r.status))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, k := range names {
		b = appendBytes(b, k)
		vs := r.header[k]
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendBytes(b, v)
		}
	}
	return append(b, r.body...)
}

func appendBytes(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decode parses a stored response. It never panics: a malformed input is errStored.
func decode(p []byte) (*response, error) {
	if len(p) == 0 || p[0] != storedVersion {
		return nil, errStored
	}
	d := decoder{p: p[1:]}
	status := d.uvarint()
	n := d.uvarint()
	if d.err != nil || status < 100 || status > 999 || n > uint64(len(d.p)) {
		return nil, errStored
	}
	r := &response{status: int(status), header: make(http.Header, n)}
	prev := ""
	for j := range n {
		k := d.bytes()
		nv := d.uvarint()
		if d.err != nil || k == "" || nv > uint64(len(d.p)) || (j > 0 && k <= prev) { // names sorted, once each
			return nil, errStored
		}
		prev = k
		vs := make([]string, 0, nv)
		for range nv {
			vs = append(vs, d.bytes())
		}
		if d.err != nil {
			return nil, errStored
		}
		r.header[k] = vs
	}
	r.body = bytes.Clone(d.p)
	return r, nil
}

type decoder struct {
	p   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) { // short, overflowing or not minimal
		d.err = errStored
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) bytes() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.p)) {
		d.err = errStored
		return ""
	}
	s := string(d.p[:n])
	d.p = d.p[n:]
	return s
}

// recorder buffers a handler's response. The header written is the handler's header map
// when it first wrote the status (or the body).
type recorder struct {
	header      http.Header
	resp        response
	wroteHeader bool
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.wroteHeader || status < 100 || status > 999 {
		return
	}
	if status < 200 { // an informational response is not the response
		return
	}
	r.wroteHeader = true
	r.resp.status = status
	r.resp.header = r.header.Clone()
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	r.resp.body = append(r.resp.body, p...)
	return len(p), nil
}

// result returns the handler's response (200 with no body when it wrote nothing).
func (r *recorder) result() *response {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return &r.resp
}

// writeTo writes resp to w: its header fields, its status, its body, byte for byte.
func (resp *response) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range resp.header {
		h[k] = append([]string(nil), vs...)
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}
