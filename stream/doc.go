// Package stream is a Redis Streams messaging SDK on rueidis: a [Producer], a [Consumer]
// running typed [Handler]s in consumer groups, retries with a [DeliveryRetryPolicy], crash
// recovery, dead letters ([DeadLetters]: list, replay, delete, purge), safe trimming
// ([Trimmer]) and idempotent sinks ([ListSink], [CheckpointedListSink]).
//
// No message is lost: every entry is handled (and acknowledged), pending for a retry, or in
// its topic's dead-letter stream. Dead-lettering is one Lua script (XADD to the dead-letter
// stream, XACK in the topic), so a failed dead-letter write leaves the entry pending.
//
// # Wire format
//
// An entry has exactly the fields key, tag, enc, body and ts (milliseconds); enc is "plain"
// (body is JSON) or "gzip" (body is base64(gzip(JSON))). Consumers decode by enc alone, so
// producers in other languages interoperate; testdata/wire_vectors.json holds exact entries.
// See [Message] for how the envelope maps to the body.
//
// # Keys
//
// A topic's stream is the topic name, with "_<env>" appended under [Config].EnvIsolation.
// Its dead-letter stream shares its hash slot: "{orders}:dlq" for "orders" (see
// [DeadLetterStreamName]), so the package works on Redis Cluster.
//
// # Delivery
//
// A Consumer reads with XREADGROUP (Config.ReadCount entries, blocking Config.BlockMs),
// hands entries to Handler.Concurrency goroutines and acknowledges results in batches.
// A failed entry stays pending; the pending-entry scan (every Autoclaim.IntervalMs) delivers
// it again once it has been idle for its backoff (Autoclaim.MinIdleMs by default), which is
// also how the entries of a crashed consumer are taken over. After MaxRetry deliveries the
// entry is dead-lettered. Consumer groups lost with a Redis restart are recreated.
//
// # Ownership
//
// Constructors take a rueidis.Client; nothing in this package closes it.
package stream
