package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redstream-go/redstream/stream"
)

// Stream returns consumer middleware (stream.Consumer.Use, stream.Handler.Middleware) that
// runs the handler at most once per message key, across redeliveries, reclaims by other
// consumers and producer retries that send the same key again: a delivery whose key
// completed is acknowledged without running the handler; one whose key is in flight on
// another consumer fails with an error wrapping ErrInFlight (and is retried later, by the
// retry policy); a handler error releases the key, so the redelivery runs it again.
//
// key returns a delivery's key; nil uses the message's Key, or its entry ID when it has
// none (an ID names one entry: a producer retry that wrote the entry again is not caught).
// An empty key runs the handler unprotected. Keys are scoped by topic and group, so every
// group runs its own side effect once. No fingerprint is checked: a key names one side
// effect. Nothing is stored but the completion itself.
//
// On a partitioned topic whose partition lease is lost (fenced), the handler's context is
// cancelled and the delivery is not acknowledged: a handler that stopped releases its key,
// and one that completed is skipped by the next owner's redelivery, so the side effect
// still runs once.
func (i *Idempotent) Stream(key func(d *stream.Delivery) string) stream.Middleware {
	return func(next stream.HandleFunc) stream.HandleFunc {
		return func(ctx context.Context, d *stream.Delivery) error {
			k := d.Key
			switch {
			case key != nil:
				k = key(d)
			case k == "":
				k = "id:" + d.ID
			}
			if k == "" {
				return next(ctx, d)
			}
			scoped := strconv.Itoa(len(d.Topic)) + ":" + d.Topic + ":" + strconv.Itoa(len(d.Group)) + ":" + d.Group + ":" + k
			_, err := i.Do(ctx, scoped, "", func(ctx context.Context) ([]byte, error) {
				return nil, next(ctx, d)
			})
			switch {
			case err == nil:
				return nil
			case errors.Is(err, ErrInFlight):
				return fmt.Errorf("idempotency: message key %q: %w", k, err)
			}
			return err
		}
	}
}
