// Issue 12: analysis in worker threads. Inputs are independent, so slices analysed by a pool
// and joined in order must give the single-thread analysis value for value; a user error in
// one slice must come back as the same one-line error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { analyze } from "../../src/analysis/analyze.ts";
import { loadEmbeddedMnist } from "../../src/data/mnist.ts";
import { modelPreset } from "../../src/nn/config.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { analyzeInWorkers } from "../../src/parallel/analyzeTask.ts";
import { inOrder } from "../../src/parallel/pool.ts";
import { checkWorkers, oversubscriptionWarning } from "../../src/parallel/workerCount.ts";
import { availableParallelism } from "node:os";
import { InputError } from "../../src/util/errors.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";
import { tinyText } from "../helpers/tinyText.ts";

await useBackend("wasm");

/** An analysis without its timings (the only field that may differ between runs). */
const values = (a: object) => JSON.stringify({ ...a, seconds: null });

test("a ViT analysed by 2 workers gives the single-thread analysis value for value, with progress over all inputs", async () => {
  // Two blocks: the attention rows of several layers must be ordered the same way however the
  // inputs are sliced.
  const model = createModel({ ...modelPreset("vit-micro"), blocks: 2 }, 4) as TransformerClassifier;
  // 8 inputs: two slices of 4 (the smallest slice analyzeInWorkers makes).
  const digits = loadEmbeddedMnist({ seed: 1, trainSize: 8, testSize: 8 }).test;
  const x = tf.tensor4d(digits.images, [8, 28, 28, 1]);
  try {
    // Few attention rows kept, so the even subsample is taken from a row order that must not
    // depend on how the inputs were sliced.
    // Block and network true values (head values are checked in workers by the text test below).
    const options = { maxIterations: 100, seed: 3, maxAttentionRows: 37, truth: { heads: false } };
    const one = analyze(model, x, options);
    assert.ok(one.attentionRows.total! > 37, `rows: ${one.attentionRows.total}`);
    const seen: number[] = [];
    const two = await analyzeInWorkers(model, x, { ...options, workers: 2, onProgress: (done) => seen.push(done) });
    assert.equal(values(two), values(one));
    assert.equal(two.inputs, 8);
    assert.deepEqual(seen.sort((a, b) => a - b).at(-1), 8);
    assert.ok(seen.length >= 2, `progress per slice: ${seen}`);
  } finally {
    x.dispose();
    model.dispose();
  }
});

test("a text model with padding analysed by 2 workers gives the single-thread analysis", async () => {
  const model = createModel(tinyText({ vocabSize: 40, maxLength: 8 }), 2) as unknown as TransformerClassifier;
  const ids = tf.tensor2d(Array.from({ length: 8 * 6 }, (_, i) => (i % 6 === 0 ? 1 : 3 + ((i * 7) % 30))), [8, 6], "int32");
  const mask = tf.tensor2d(Array.from({ length: 8 * 6 }, (_, i) => (i % 6 < 3 + (Math.floor(i / 6) % 4) ? 1 : 0)), [8, 6]);
  try {
    const options = { mask, maxIterations: 200 };
    const one = analyze(model, ids, options);
    const two = await analyzeInWorkers(model, ids, { ...options, workers: 2 });
    assert.equal(values(two), values(one));
  } finally {
    tf.dispose([ids, mask]);
    model.dispose();
  }
});

test("non-finite logits in a worker's slice are the same one-line InputError, naming the inputs in the whole set", async () => {
  const model = createModel(modelPreset("vit-micro"), 4) as TransformerClassifier;
  const pixels = new Float32Array(8 * 784).fill(0.5);
  pixels.fill(NaN, 5 * 784, 6 * 784); // input 6 of 8, in the second slice
  const x = tf.tensor4d(pixels, [8, 28, 28, 1]);
  try {
    const expected = /^model: its logits are not finite at input 6: the weights are broken or overflow/;
    assert.throws(() => analyze(model, x, { truth: { heads: false, blocks: false } }), (e: unknown) => expected.test((e as Error).message));
    await assert.rejects(analyzeInWorkers(model, x, { workers: 2, truth: { heads: false, blocks: false } }), (e: unknown) => {
      assert.ok(e instanceof InputError, String(e));
      assert.match((e as Error).message, expected);
      return true;
    });
  } finally {
    x.dispose();
    model.dispose();
  }
});

test("slices joined in order: the earliest failing slice's error, whichever failed first in time", async () => {
  const later = (ms: number, outcome: () => unknown) => new Promise((resolve) => setTimeout(resolve, ms)).then(outcome);
  assert.deepEqual(await inOrder([later(20, () => "a"), later(0, () => "b")]), ["a", "b"]);
  await assert.rejects(
    inOrder([later(0, () => "ok"), later(30, () => { throw new InputError("inputs 5, 6"); }), later(0, () => { throw new InputError("inputs 9, 10"); })]),
    /^InputError: inputs 5, 6$/,
  );
});

test("--workers takes an integer from 1 to 256 (exit 2, one line)", async () => {
  assert.equal(checkWorkers(3, "analyze"), 3);
  assert.throws(() => checkWorkers(0, "analyze"), /analyze: --workers: must be an integer from 1 to 256, got 0/);
  const r = await runAttnlipHere(["analyze", "--random-init", "--model", "vit-micro", "--n", "2", "--workers", "0"]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1);
  assert.match(r.stderr, /analyze: --workers: must be an integer from 1 to 256, got "0"/);
});

test("more workers than cores: a one-line warning on stderr, and the run goes on", async () => {
  assert.equal(oversubscriptionWarning(2, "train", "--workers", 2), null);
  assert.match(
    oversubscriptionWarning(64, "train", "--workers", 2) ?? "",
    /^train: warning: --workers 64 is more than the 2 cores of this machine: .* slower than 2 workers$/,
  );
  assert.match(oversubscriptionWarning(5, "attack", "ATTNLIP_WORKERS", 2) ?? "", /^attack: warning: ATTNLIP_WORKERS=5 is more than the 2 cores/);
  const workers = availableParallelism() + 1;
  const r = await runAttnlipHere(["analyze", "--random-init", "--model", "vit-micro", "--n", "2", "--no-head-truth", "--no-block-truth", "--workers", String(workers)]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, new RegExp(`analyze: warning: --workers ${workers} is more than the ${workers - 1} cores`));
  const fromEnv = runAttnlip(["analyze", "--random-init", "--model", "vit-micro", "--n", "2", "--no-head-truth", "--no-block-truth"], { env: { ATTNLIP_WORKERS: String(workers) } });
  assert.equal(fromEnv.code, 0, fromEnv.stderr);
  assert.match(fromEnv.stderr, new RegExp(`analyze: warning: ATTNLIP_WORKERS=${workers} is more than`));
});

test("a bad ATTNLIP_WORKERS stops analyze and attack before anything loads, quoting what was set (exit 2, one line)", async () => {
  for (const command of ["analyze", "attack"]) {
    // attack as a separate process, as a user runs it; analyze in this one.
    const args = [command, "--random-init", "--model", "vit-micro", "--n", "2"];
    const r = command === "attack" ? runAttnlip(args, { env: { ATTNLIP_WORKERS: "two" } }) : await runAttnlipHere(args, { env: { ATTNLIP_WORKERS: "two" } });
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /ATTNLIP_WORKERS: must be an integer from 1 to 256 \(or unset: the number of cores\), got "two"/);
    assert.equal(r.stdout, "", `${command} printed before the check: ${r.stdout}`);
  }
});

