// The published declarations compile in a strict consumer (test/types/consumer.ts imports
// the package by its name, as an application does), without lib.dom.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

test('the type declarations serve a strict consumer', () => {
  const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
  const r = spawnSync(process.execPath, [tsc, '-p', fileURLToPath(new URL('./types/tsconfig.json', import.meta.url))], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
