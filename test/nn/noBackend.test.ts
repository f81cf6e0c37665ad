// The library without useBackend (issue: a newcomer's first script): every tfjs computation
// throws one clear line naming useBackend, instead of tfjs's "The highest priority backend
// 'wasm' has not yet been initialized" and, in Node, a screen of the wasm module's minified
// source from its exception handler. After useBackend everything runs as before.
// The checks before useBackend run in a fresh process: npm test runs the files of a folder in
// one process (scripts/test.mjs), where an earlier file has already picked a backend.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { NO_BACKEND_MESSAGE, tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/index.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

test("before useBackend, making a tensor or running any op throws one line naming useBackend", () => {
  assert.match(
    NO_BACKEND_MESSAGE,
    /^attnlip: no tfjs backend selected: call `await useBackend\(\)`/,
  );
  const script = `
import { tf } from "./src/backend.ts";
import { createModel } from "./src/index.ts";
const results = [];
for (const [what, run] of [
  ["createModel", () => createModel("vit-micro", 0)],
  ["tf.tensor", () => tf.tensor([1, 2])],
  ["tf.zeros", () => tf.zeros([2])],
  ["tf.fill (a kernel without inputs)", () => tf.fill([2], 1)],
  ["tf.range", () => tf.range(0, 3)],
  ["tf.randomUniform", () => tf.randomUniform([2])],
]) {
  try {
    run();
    results.push([what, "no error"]);
  } catch (e) {
    results.push([what, e.message]);
  }
}
console.log(JSON.stringify({ tensors: tf.memory().numTensors, results }));
`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: root,
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr.slice(0, 2000));
  const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as {
    tensors: number;
    results: [string, string][];
  };
  assert.equal(out.tensors, 0, "tf.memory() answers");
  assert.equal(out.results.length, 6);
  for (const [what, message] of out.results) assert.equal(message, NO_BACKEND_MESSAGE, what);
});

test("a script that forgets useBackend ends with that line, not the wasm module's source", () => {
  const script = 'import { createModel } from "./src/index.ts"; createModel("vit-micro", 0);';
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: root,
    encoding: "utf8",
  });
  assert.notEqual(r.status, 0);
  assert.ok(r.stderr.includes(`Error: ${NO_BACKEND_MESSAGE}`), r.stderr.slice(0, 2000));
  assert.doesNotMatch(r.stderr, /WasmBackendModule|has not yet been initialized/);
  assert.ok(r.stderr.length < 4000, `${r.stderr.length} characters of stderr`);
});

test("after useBackend the same calls work", async () => {
  await useBackend("cpu");
  assert.equal(tf.getBackend(), "cpu");
  const model = createModel("vit-micro", 0);
  assert.deepEqual(Array.from(tf.tidy(() => tf.fill([2], 3)).dataSync()), [3, 3]);
  model.dispose();
  await useBackend("wasm");
  assert.deepEqual(Array.from(tf.tidy(() => tf.add(tf.range(0, 3), 1)).dataSync()), [1, 2, 3]);
});
