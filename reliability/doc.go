// Package reliability is the user-side reliability layer: retrying a function with backoff
// ([RetryPolicy], [Executor]), applying a failure strategy to a stream of elements
// ([FailureStrategy], [Config], [Processor]), and keeping failed elements in a bounded
// in-memory dead-letter queue ([DeadLetterQueue], [FailedElement]).
//
// It wraps the caller's own functions and never handles message delivery: redelivery,
// persistent dead letters and replay of Redis Streams messages belong to package stream,
// whose dead letters survive a crash. The in-memory [DeadLetterQueue] is lost when the process
// exits; use it for in-process tool chains (batch jobs, offline replays), never as the
// failure exit of a stream consumer.
//
// Backoff delays are computed by core.Backoff, the same integer algorithm every redstream
// runtime uses: Delay(n) = min(InitialDelay × Multiplier^(n-1), MaxDelay), clamped without
// overflow, with the jitter modes of core.
package reliability
