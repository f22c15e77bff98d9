// Package console is an operator's web console for redstream's Redis Streams: an
// [http.Handler] to mount behind an application's own authentication.
//
// Each topic's scheduled messages (WithDelay, WithDeliverAt) are listed in due order and can
// be cancelled or delivered now. Its first page is an overview: the server's facts (version, memory, eviction policy, with
// a warning when the policy can delete queue data, clients, operations per second) and the
// topics (length, first and last entry, consumers, pending entries, the slowest group's lag,
// scheduled messages, dead letters, with totals). It shows each topic (the trimming settings), each topic's
// consumer groups (pending, lag, last delivered id), each group's consumers (idle time,
// pending count, and which ones the consumers' housekeeping will remove) and pending list
// (delivery counts, idle times), and each topic's dead letters: a list searched by group,
// error text, body text, key and time range (bounded in time per page, resumable), one entry
// with its fields and decoded body, and the actions replay (one or a selection), delete and
// purge (after a typed confirmation). Its rate limits page shows the limiters of
// [Options.Limiters] and, for a key, the state of each limit (what it admits now, whether a
// request would be admitted, remaining, retry-after, when it is full again), read with the
// engine's PeekEach ([Peeker]), which records nothing; limiters that are also a
// [Resetter] can reset a key.
//
// Everything it reads from the streams uses read-only commands (SCAN, XLEN, XRANGE,
// XREVRANGE, XINFO, XPENDING), each with a deadline; everything it changes goes through
// [stream.DeadLetters].
// Topics are found by SCAN for keys of type stream, on every master of a cluster, or given
// in [Options.Topics].
//
// Security: pages are rendered by html/template (stream entries are treated as hostile
// input: every value is escaped, bodies are cut at [Options.MaxBodyBytes]); a strict
// Content-Security-Policy allows only the console's own script and style; GET and HEAD
// never change state (a key lookup included); every change is a POST carrying a CSRF token
// (an HMAC of a per-browser cookie under the console's secret, compared in constant time),
// and cross-origin POSTs are refused by their Origin and Sec-Fetch-Site headers
// ([http.CrossOriginProtection]). Rate-limit keys are hostile input too: at most
// [MaxKeyBytes], escaped and cut for display, binary keys entered and shown as hex. In
// [Options.ReadOnly] mode no action is offered and every POST is refused. No page shows more
// than [Options.PageSize] entries; longer lists are paged by entry id.
//
// The console does not authenticate anyone: mount it behind the application's own
// authentication and authorization.
package console
