package core

// Decision is the outcome of one limiter step. Durations are microseconds measured from the
// caller's now.
type Decision struct {
	// Allowed reports whether the request was admitted (and its cost consumed).
	Allowed bool
	// Limit is the most a key can hold: the burst of a bucket, the limit of a window.
	Limit int64
	// Remaining is how much more cost the key would admit right now, after this decision.
	Remaining int64
	// RetryAfter is 0 when allowed; otherwise the time until this same request could pass,
	// assuming no other traffic on the key.
	RetryAfter int64
	// ResetAfter is the time until the key is back to its initial, fully available state.
	ResetAfter int64
	// Delay is set by the leaky bucket only: how long an admitted request should wait
	// before proceeding so that admitted requests leave evenly spaced (traffic shaping).
	Delay int64
}
