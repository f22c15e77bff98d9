// Example: leased quota for a hot key (Go's redisbackend Options.Quota, on the same keys and
// quota.lua): the limiter takes a slice of the key's budget in one script call and admits
// from it in process, giving back what it did not use in the call that takes the next
// slice, so 1000 requests under the limit take a handful of round trips, and Go and Node.js
// processes sharing the key never admit more than the limit together.
//
//	REDIS_URL=redis://127.0.0.1:6379 node examples/node/quota.mjs
// In a project of your own: import Redis from 'ioredis'; import { ... } from '@redstream-go/redstream';
import { createRequire } from 'node:module';

import { createRedisLimiter, fixedWindow } from '../../js/dist/index.js';

const Redis = createRequire(new URL('../../js/', import.meta.url))('ioredis'); // the package's own dev dependency

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const limiter = await createRedisLimiter(redis, fixedWindow(1000, 100_000), { quota: { enabled: true } }); // 100 ms leases, at most 10% each
const now = 1893456000000000; // 2030-01-01T00:00:00Z in µs
let admitted = 0;
for (let i = 0; i < 1000; i++) {
  if ((await limiter.allow('tenant:1', { now: now + i * 10 })).allowed) admitted++; // 100,000 requests per second
}
const s = limiter.quotaStats;
console.log(`admitted ${admitted} of 1000 in ${s.calls} script calls (${s.localAllowed} in process)`);
await limiter.reset('tenant:1');
redis.disconnect();
