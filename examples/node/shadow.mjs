// Example: a new limit rolled out in shadow mode (Go's redstream.Shadow): every decision is the
// limit's, but what it would deny is admitted, marked shadow and counted, so that the
// limit's effect can be logged before it is enforced.
//
//	node examples/node/shadow.mjs
import { createLimiter, shadow, tokenBucket } from '../../js/dist/index.js';

const trial = shadow(await createLimiter(tokenBucket(2, 1)), {
  onShadowDenied: (key, d) => console.log(`would deny ${key}: retry in ${d.retryAfter} µs`),
});
const now = 1767225600000000; // 2026-01-01T00:00:00Z in µs
for (let i = 0; i < 3; i++) {
  const d = trial.allow('alice', { now });
  console.log(`allowed=${d.allowed} shadow=${d.shadow === true}`);
}
console.log(`shadow denials: ${trial.shadowDenied}`);
