// Package crossruntime holds the cross-runtime tests of the Node.js package in js/: Go
// (redisbackend) and Node.js (the package's Redis engine, in a child process) decide on the
// same keys of one real redis-server and of a real 3-master cluster at the same time, and
// the total admitted must equal each limit exactly, for every algorithm, and every element
// must be seen first exactly once across both runtimes, for every deduplicator. With leased
// quota both runtimes send quota.lua the same arguments for the same requests, and sharing a
// hot key they never admit more than a window's limit. It has no code of its own.
package crossruntime
