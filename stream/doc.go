// Package stream is a Redis Streams messaging SDK on rueidis: a [Producer] (with
// [Producer.SendBatch] and delayed sends, [WithDelay]), a [Consumer] running typed [Handler]s in consumer groups, message
// headers, middleware, retries with a [DeliveryRetryPolicy], crash recovery, dead letters
// ([DeadLetters]: list, replay with a [WithReplayHandler], move, delete, purge;
// [RegisterDeadLetters] consumes them; [Message.DeadLetter] dead-letters explicitly), safe
// trimming by length and age ([Trimmer]), delete-after-ack (Handler.DeleteOnAck), optional
// deduplication of business keys (Handler.Dedup) and idempotent sinks ([ListSink],
// [CheckpointedListSink]). Tracing with OpenTelemetry lives in the separate module
// stream/otelstream.
//
// No message is lost: every entry is handled (and acknowledged), pending for a retry, or in
// its topic's dead-letter stream. Dead-lettering is one Lua script (XADD to the dead-letter
// stream, XACK in the topic), so a failed dead-letter write leaves the entry pending.
//
// # Wire format
//
// An entry has exactly the fields key, tag, enc, body and ts (milliseconds); enc is "plain"
// (body is JSON) or "gzip" (body is base64(gzip(JSON))). Consumers decode by enc alone, so
// producers in other languages interoperate. WIRE.md (beside this file) is the whole wire
// format and key schema; testdata/wire_vectors.json holds exact entries.
// See [Message] for how the envelope maps to the body. [Message].Headers travel as extra
// fields after these five, each named "h:" + name ("h:traceparent"), which
// consumers that ignore unknown fields skip; other unknown fields are ignored.
//
// # Keys
//
// A topic's stream is the topic name, with "_<env>" appended under [Config].EnvIsolation.
// Its dead-letter stream shares its hash slot: "{orders}:dlq" for "orders" (WIRE.md
// lists every key), so the package works on Redis Cluster.
//
// # Delivery
//
// A Consumer reads with XREADGROUP (at most Config.ReadCount entries, blocking
// Config.BlockTimeout, and never more than its handler has free slots for: credit-based
// read-ahead), hands entries to Handler.Concurrency goroutines and acknowledges results in
// batches. Entries in hand are leased: their idle time is refreshed every
// Autoclaim.MinIdle/3, so no consumer takes them over while they are handled, however long
// that takes; Handler.Timeout bounds a handler call. A failed entry stays pending and the
// consumer that failed it delivers it again when its backoff ends; the pending-entry scan
// (every Autoclaim.Interval) takes over the entries of crashed consumers once they have
// been idle for Autoclaim.MinIdle. After MaxDeliveries deliveries the entry is
// dead-lettered. Consumer groups lost with a Redis restart are recreated.
//
// Handler.OrderedByKey handles the messages of one key one at a time and in stream order
// (different keys in parallel); a failed message then blocks the later messages of its
// key until it is retried or dead-lettered. The order holds for what one Consumer receives.
//
// Deliveries are fenced: Message.DeliveryCount, raised by Redis on every claim of the
// entry, is the delivery's token. The acknowledgement and dead-letter move of a delivery
// that is no longer current (a handler that stalled past its lease while another consumer
// took the entry over) are refused with [ErrStaleDelivery], and [Message.Guard] runs a
// handler's own Lua write only while its delivery is current.
//
// # Delayed delivery
//
// [WithDelay] and [WithDeliverAt] schedule a message: it waits in a sorted set and a hash in
// the stream's hash slot (WIRE.md) until it is due, when the mover of any running
// handler of the topic moves it into the stream with one script (at the due time, and at
// least every Config.Delay.PollInterval). [Producer.CancelScheduled] takes a scheduled
// message back; [Producer.Scheduled] counts them; [Producer.MoveDue] moves due messages
// without a consumer.
//
// # Middleware
//
// A [Middleware] wraps the handle call and sees each [Delivery] (envelope, headers,
// delivery count); [Consumer.Use] adds middleware for every handler, Handler.Middleware for
// one. Outermost first: the Handler.Timeout deadline and the consumer's own recover, the
// Use middleware, the Handler.Middleware, then Handle. [Recover], [Timeout] and [Logging]
// ship with the package. [Producer.Use] adds [SendMiddleware] around each Send, which may
// set outgoing headers (trace context).
//
// # Lifecycle
//
// [Consumer.Run] blocks until its context ends, then drains in-flight handlers for
// Config.ShutdownTimeout; [Consumer.Close] does the same on demand, and every Redis call it
// waits for has a deadline. [Consumer.Unregister] stops and drains one handler the same
// way; [Register] on a running consumer starts the handler at once. [Consumer.Pause],
// [Consumer.Resume], [Consumer.Stats] and [Consumer.Healthy] serve operations and
// readiness probes. A consumer that closes with
// nothing pending deletes its name from the group; names left by crashed processes are
// removed after Config.ConsumerTimeout once they own nothing.
//
// # Ownership
//
// Constructors take a rueidis.Client; nothing in this package closes it.
package stream
