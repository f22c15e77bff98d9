package stream

import (
	"context"
	"time"
)

// DeadLetterMessage is one dead letter delivered to a DeadLetterHandler: the dead letter's
// record and the message it holds.
type DeadLetterMessage[T any] struct {
	// DeadLetter is the record: its id in the dead-letter stream, the original entry's
	// fields and id, the group that gave up on it, its last consumer, its deliveries, the
	// error and the time it was dead-lettered.
	DeadLetter
	// Message is the message as it was sent (envelope, headers, body). Its ID is the dead
	// letter's id, Topic is the topic + ":dlq", DeliveryCount counts deliveries to the
	// dead-letter handler's group; Ack and DeferAck work on the dead letter as on any
	// delivery. Body is zero when BodyErr is set.
	Message *Message[T]
	// BodyErr is why the body could not be decoded into T (wrapping ErrUndecodable): a
	// poison message, or an entry without a body (an undecodable scheduled message). Nil
	// when Body holds the message.
	BodyErr error
}

// DeadLetterHandler handles the dead letters of one topic for one consumer group of its
// dead-letter stream: alerting, archiving, repairing. Topic, Group and Handle are required.
// The group is created on the dead-letter stream ({topic}:dlq) like any group; a dead
// letter whose handling fails is retried like a message (RetryPolicy, MaxDeliveries) and
// then moved to the dead-letter stream's own dead-letter stream ({topic}:dlq:dlq). Dead
// letters the DeadLetters administration replays or deletes, or the dead-letter bounds
// (Config.DeadLetter) drop, before this group acknowledges them are not delivered (or are
// acknowledged unhandled): the group sees the dead letters still there when it reads.
type DeadLetterHandler[T any] struct {
	// Topic is the topic whose dead letters to consume (before env isolation).
	Topic string
	// Group is the consumer group on the dead-letter stream.
	Group string
	// Handle handles one dead letter; nil acknowledges it.
	Handle func(ctx context.Context, dl *DeadLetterMessage[T]) error
	// Concurrency, MaxDeliveries, RetryPolicy, NoRetry and Timeout are as in Handler.
	Concurrency   int
	MaxDeliveries int
	RetryPolicy   DeliveryRetryPolicy
	NoRetry       bool
	Timeout       time.Duration
	// StartID is where a new group starts: "0" (the default: every dead letter kept) or
	// "$" (only new dead letters).
	StartID string
}

// RegisterDeadLetters adds a handler of topic's dead letters to c, as Register adds a
// message handler (before Start, or started at once on a running consumer). It returns the
// errors of Register. Unregister it with the topic + ":dlq" ("orders:dlq") and its group.
// Its metrics carry topic="<topic>:dlq".
func RegisterDeadLetters[T any](c *Consumer, h DeadLetterHandler[T]) error {
	if h.Handle == nil {
		return errInvalid("dead-letter handler for topic %q: nil Handle", h.Topic)
	}
	handle := h.Handle
	return Register(c, Handler[T]{
		Topic: h.Topic, Group: h.Group, Concurrency: h.Concurrency, MaxDeliveries: h.MaxDeliveries,
		RetryPolicy: h.RetryPolicy, NoRetry: h.NoRetry, Timeout: h.Timeout, StartID: h.StartID,
		deadLetters: true, lenient: true,
		Handle: func(ctx context.Context, m *Message[T]) error {
			dl := &DeadLetterMessage[T]{Message: m}
			if m.d != nil {
				dl.DeadLetter = toDeadLetter(entry{id: m.ID, fields: m.d.fields})
				dl.BodyErr = m.d.bodyErr
			}
			return handle(ctx, dl)
		},
	})
}
