// Package httpidem is net/http middleware for idempotency keys, following the IETF
// httpapi draft (draft-ietf-httpapi-idempotency-key-header-07): a client sends
//
//	POST /payments HTTP/1.1
//	Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"
//
// and retries with the same key; the handler runs once, and every retry gets the first
// response (status, header fields and body, byte for byte) instead of a second payment.
// A retry while the first attempt runs gets 409 Conflict, the same key with another request
// 422, a malformed or (when required) missing key 400, each as problem details (RFC 9457).
//
// The header field is a structured-field String (RFC 9651); keys are scoped by the
// principal Options.Principal returns, so one client's key cannot replay another's
// response; a request's fingerprint is a digest of its method, path, query, body and the
// chosen header fields. Responses with a 5xx status are not stored (see Options.Store).
// The keys live in an idempotency.Idempotent (Redis for several processes), whose options
// say how long they are kept, how a crashed server's key is released and what happens when
// Redis fails: 503 by default, never running a payment unprotected.
package httpidem
