// Example: a per-key token bucket (capacity 3, 1 token per second) decided by redstream's
// core WebAssembly module. The state of a key is one integer, its TAT, kept here in a Map.
//
//	node examples/node/example.mjs [path/to/core.wasm]
import { load } from './core.mjs';

const path = process.argv[2] ?? new URL('../../wasmcore/core.wasm', import.meta.url);
const core = await load(path);

const tats = new Map(); // key -> TAT (µs)
function allow(key, now) {
  const d = core.tokenBucketStep(3, 1, tats.get(key) ?? 0n, now);
  if (d.allowed) {
    tats.set(key, d.tat);
  }
  return d;
}

const t0 = 1767225600000000n; // 2026-01-01T00:00:00Z in µs
const second = 1000000n;
for (const [at, key] of [[0n, 'alice'], [0n, 'alice'], [0n, 'alice'], [0n, 'alice'], [0n, 'bob'], [second, 'alice']]) {
  const d = allow(key, t0 + at);
  console.log(`t=${at / second}s ${key}: allowed=${d.allowed} remaining=${d.remaining} retryAfter=${d.retryAfter}µs`);
}
