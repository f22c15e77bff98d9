package core

// Combine merges the decisions of several limits applied to one request all-or-nothing: the
// request is allowed only if every limit allows it (and then every limit records it). The
// result has the smallest Remaining (with that limit's Limit), and the largest RetryAfter,
// ResetAfter and Delay. Combine of no decisions is an allowed zero Decision.
func Combine(ds []Decision) Decision {
	if len(ds) == 0 {
		return Decision{Allowed: true}
	}
	out := ds[0]
	for _, d := range ds[1:] {
		out.Allowed = out.Allowed && d.Allowed
		if d.Remaining < out.Remaining {
			out.Remaining, out.Limit = d.Remaining, d.Limit
		}
		out.RetryAfter = max64(out.RetryAfter, d.RetryAfter)
		out.ResetAfter = max64(out.ResetAfter, d.ResetAfter)
		out.Delay = max64(out.Delay, d.Delay)
	}
	if !out.Allowed {
		out.Delay = 0
	}
	return out
}
