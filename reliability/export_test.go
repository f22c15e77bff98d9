package reliability

// Unexported functions the external tests check directly.
var (
	ParseFailureStrategy = parseFailureStrategy
)

// Validate is the validation NewExecutor applies.
func (p RetryPolicy) Validate() error { return p.validate() }

// Attempts is the total number of tries of p.
func (p RetryPolicy) Attempts() int { return p.attempts() }

// IsRetryable is the retry decision of p.
func (p RetryPolicy) IsRetryable(err error) bool { return p.isRetryable(err) }

// Validate is the validation NewProcessor applies.
func (c Config[T]) Validate() error { return c.validate() }
