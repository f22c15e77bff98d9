// Example: a per-key token bucket (capacity 3, 1 token per second) decided in process by
// redstream's Node.js package (js/), on the same core as Go; the package keeps each key's
// state in its key table. Build the package first: cd js && npm ci && npm run build.
//
//	node examples/node/example.mjs
import { createLimiter, tokenBucket } from '../../js/dist/index.js';

const limiter = await createLimiter(tokenBucket(3, 1));

const t0 = 1767225600000000; // 2026-01-01T00:00:00Z in µs
const second = 1000000;
for (const [at, key] of [[0, 'alice'], [0, 'alice'], [0, 'alice'], [0, 'alice'], [0, 'bob'], [second, 'alice']]) {
  const d = limiter.allow(key, { now: t0 + at });
  console.log(`t=${at / second}s ${key}: allowed=${d.allowed} remaining=${d.remaining} retryAfter=${d.retryAfter}µs`);
}
