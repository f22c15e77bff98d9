// Copies redstream's core WebAssembly module from the Go side (../wasmcore/core.wasm, built
// and checked by `cd wasmcore && go generate ./...`) into the package, and checks it against
// the SHA-256 digest wasmcore/module_gen.go records for it. Run by `npm run build`.
import { createHash } from 'node:crypto';
import { copyFile, readFile } from 'node:fs/promises';

const src = new URL('../../wasmcore/core.wasm', import.meta.url);
const info = new URL('../../wasmcore/module_gen.go', import.meta.url);
const dst = new URL('../core.wasm', import.meta.url);

const bytes = await readFile(src);
const want = /ModuleSHA256 = "([0-9a-f]{64})"/.exec(await readFile(info, 'utf8'))?.[1];
const got = createHash('sha256').update(bytes).digest('hex');
if (!want) {
  throw new Error(`copy-wasm: no ModuleSHA256 in ${info.pathname}`);
}
if (got !== want) {
  throw new Error(`copy-wasm: ${src.pathname} has SHA-256 ${got}, module_gen.go records ${want}: run cd wasmcore && go generate ./...`);
}
await copyFile(src, dst);
console.log(`copy-wasm: core.wasm (${bytes.length} bytes, sha256 ${got.slice(0, 12)}…)`);
