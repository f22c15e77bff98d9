// The packed tarball (npm pack) works on its own: unpacked as node_modules/@redstream-go/redstream
// of an empty project, importing it by name finds its core.wasm and decides.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

test('the packed package works from node_modules', (t) => {
  const pkg = fileURLToPath(new URL('..', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'redstream-pack-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const out = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: pkg, encoding: 'utf8' }));
  const files = out[0].files.map((f) => f.path);
  for (const f of ['core.wasm', 'dist/index.js', 'dist/index.d.ts', 'README.md', 'package.json']) assert.ok(files.includes(f), `tarball lacks ${f}`);
  assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('test/') || f.startsWith('node_modules/')), files.join(' '));
  const into = join(dir, 'app', 'node_modules', '@redstream-go', 'redstream');
  mkdirSync(into, { recursive: true });
  execFileSync('tar', ['-xzf', join(dir, out[0].filename), '-C', into, '--strip-components=1']);
  writeFileSync(join(dir, 'app', 'main.mjs'), `import { createLimiter, tokenBucket } from '@redstream-go/redstream';
const l = await createLimiter(tokenBucket(2, 1));
console.log([0, 0, 0].map(() => l.allow('k', { now: 1767225600000000 }).allowed).join(' '));
`);
  const r = spawnSync(process.execPath, ['main.mjs'], { cwd: join(dir, 'app'), encoding: 'utf8' });
  assert.equal(r.stderr, '');
  assert.equal(r.stdout, 'true true false\n');
  // CommonJS: require of the ES module (Node.js 20.19+), with nothing on stderr.
  writeFileSync(join(dir, 'app', 'main.cjs'), `const { createLimiter, tokenBucket } = require('@redstream-go/redstream');
createLimiter(tokenBucket(2, 1)).then((l) => console.log([0, 0, 0].map(() => l.allow('k', { now: 1767225600000000 }).allowed).join(' ')));
`);
  const c = spawnSync(process.execPath, ['main.cjs'], { cwd: join(dir, 'app'), encoding: 'utf8' });
  assert.equal(c.stderr, '');
  assert.equal(c.stdout, 'true true false\n');
});
