// The README's examples (examples/node) run and print what the README says.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { startRedis } from './helpers.mjs';

const root = new URL('../..', import.meta.url);

function run(script, env = {}) {
  const r = spawnSync(process.execPath, [script], { cwd: root, encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(r.status, 0, `${script}: ${r.stderr}`);
  assert.equal(r.stderr, '', `${script} wrote to stderr (a warning?)`);
  return r.stdout;
}

test('examples/node/example.mjs', () => {
  assert.equal(run('examples/node/example.mjs'), `t=0s alice: allowed=true remaining=2 retryAfter=0µs
t=0s alice: allowed=true remaining=1 retryAfter=0µs
t=0s alice: allowed=true remaining=0 retryAfter=0µs
t=0s alice: allowed=false remaining=0 retryAfter=1000000µs
t=0s bob: allowed=true remaining=2 retryAfter=0µs
t=1s alice: allowed=true remaining=0 retryAfter=0µs
`);
});

test('examples/node/vectors.mjs', async () => {
  const { readFile } = await import('node:fs/promises');
  const cases = JSON.parse(await readFile(new URL('examples/node/vectors.json', root), 'utf8')).cases.length;
  assert.ok(cases > 500, `${cases} vectors`);
  assert.equal(run('examples/node/vectors.mjs'), `${cases} passed, 0 failed\n`);
});

test('examples/node/redis.mjs', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  assert.equal(run('examples/node/redis.mjs', { REDIS_URL: `redis://127.0.0.1:${r.port}` }), `streaming:rl:{user:1}:sliding.60000000.2
allowed=true remaining=1
allowed=true remaining=0
allowed=false remaining=0
`);
});

test('examples/node/lease.mjs', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  assert.equal(run('examples/node/lease.mjs', { REDIS_URL: `redis://127.0.0.1:${r.port}` }), `a=true b=true c=false
released: true, again: false
after a's release: true
`);
});

test('examples/node/carry.mjs', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  assert.equal(run('examples/node/carry.mjs', { REDIS_URL: `redis://127.0.0.1:${r.port}` }), `allowed=true remaining=7
`);
});

test('examples/node/shadow.mjs', () => {
  assert.equal(run('examples/node/shadow.mjs'), `allowed=true shadow=false
allowed=true shadow=false
would deny alice: retry in 1000000 µs
allowed=true shadow=true
shadow denials: 1
`);
});

test('examples/node/wait.mjs', () => {
  assert.equal(run('examples/node/wait.mjs'), `request 0: allowed=true
request 1: allowed=true
request 2: allowed=true
DEADLINE_EXCEEDED: retry in 10 s
`);
});

test('examples/node/quota.mjs', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  assert.equal(run('examples/node/quota.mjs', { REDIS_URL: `redis://127.0.0.1:${r.port}` }), `admitted 1000 of 1000 in 2 script calls (998 in process)
`);
});
