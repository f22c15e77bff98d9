package stream

import "github.com/redstream-go/redstream/internal/streamwire"

// Test hooks of idempotent sends, for the external tests.

// IdempotencyPath returns how p writes messages with an idempotency key: "idmp" (XADD
// IDMP), "script" (xadd_idem.lua), or "" before its first keyed send.
func IdempotencyPath(p *Producer) string {
	switch p.idmp.Load() {
	case idmpYes:
		return "idmp"
	case idmpNo:
		return "script"
	}
	return ""
}

// ForceIdempotencyScript makes p use xadd_idem.lua for keyed sends, whatever the server has.
func ForceIdempotencyScript(p *Producer) { p.idmp.Store(idmpNo) }

// SentKey is streamwire.SentKey: the record of idempotency key id of stream on the script path.
func SentKey(stream, id string) string { return streamwire.SentKey(stream, id) }

// IDMPProducer is idmpProducer: the IDMP producer id of an idempotency key.
func IDMPProducer(key string) string { return idmpProducer(key) }
