// Example: waiting for a limit instead of failing (Go's redstream.Wait): wait sleeps each
// denial's retryAfter (plus a jitter of up to an eighth) and asks again; a deadline it cannot
// make rejects at once with DEADLINE_EXCEEDED.
//
//	node examples/node/wait.mjs
import { createLimiter, tokenBucket, wait } from '../../js/dist/index.js';

const limiter = await createLimiter(tokenBucket(1, 20)); // 1 token, 20 per second
for (let i = 0; i < 3; i++) {
  const d = await wait(limiter, 'jobs', { timeoutMs: 1000 }); // the 2nd and 3rd wait ~50 ms each
  console.log(`request ${i}: allowed=${d.allowed}`);
}
const slow = await createLimiter(tokenBucket(1, 0.1)); // a token per 10 s
slow.allow('jobs');
try {
  await wait(slow, 'jobs', { timeoutMs: 100 });
} catch (e) {
  console.log(`${e.code}: retry in ${Math.round(e.decision.retryAfter / 1e6)} s`);
}
