// Example: one limit shared by every process, Go or Node.js, on one Redis: the package's
// Redis engine runs the Go engine's Lua scripts on the same keys, so a Go service with
// redisbackend.NewLimiter(client, redstream.SlidingWindow(time.Minute, 2), redisbackend.Options{})
// and this script draw on the same two requests per minute for "user:1".
//
//	REDIS_URL=redis://127.0.0.1:6379 node examples/node/redis.mjs
// In a project of your own: import Redis from 'ioredis'; import { ... } from '@redstream-go/redstream';
import { createRequire } from 'node:module';

import { createRedisLimiter, slidingWindow } from '../../js/dist/index.js';

const Redis = createRequire(new URL('../../js/', import.meta.url))('ioredis'); // the package's own dev dependency

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const limiter = await createRedisLimiter(redis, slidingWindow(60_000, 2));
console.log(limiter.keys('user:1')[0]); // the key Go uses too
for (let i = 0; i < 3; i++) {
  const d = await limiter.allow('user:1'); // at the Redis server's TIME
  console.log(`allowed=${d.allowed} remaining=${d.remaining}`);
}
await limiter.reset('user:1');
redis.disconnect();
