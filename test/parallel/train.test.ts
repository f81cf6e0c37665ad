// Issue 12: data-parallel training. The slices' shares of a batch's loss must add up to the
// whole batch's loss and gradient (JaSMin included, padding masks included); a run repeated
// with the same worker count must be bit-identical, agree with one thread to float32
// rounding, resume across worker counts, and stop cleanly when a worker throws.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import { batchSlices, trainInWorkers, workerStepper } from "../../src/parallel/trainTask.ts";
import { batchTotals } from "../../src/train/jasmin.ts";
import { lossGradients, type JasminSettings } from "../../src/train/step.ts";
import type { TrainOptions } from "../../src/train/trainer.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { QUIET, tempDir, TINY } from "../train/helpers.ts";
import { tinyText, wordPair } from "../helpers/tinyText.ts";

await useBackend("wasm");

const JASMIN: JasminSettings = { lambda: 0.5, norm: "top2", reduce: "max-log", layers: null };

/** Every weight of a model, flat, in parameter order. */
function flatWeights(model: { getWeights(): Map<string, { data: Float32Array }> }): Float32Array {
  const parts = [...model.getWeights().values()].map((w) => w.data);
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

function maxDifference(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test("batchSlices cuts a batch into contiguous, non-empty slices in order", () => {
  assert.deepEqual(batchSlices(10, 2), [{ start: 0, size: 5 }, { start: 5, size: 5 }]);
  assert.deepEqual(batchSlices(7, 3), [{ start: 0, size: 3 }, { start: 3, size: 3 }, { start: 6, size: 1 }]);
  assert.deepEqual(batchSlices(1, 4), [{ start: 0, size: 1 }]);
});

for (const reduce of ["max-log", "max", "mean"] as const)
  test(`the slices' shares of a padded text batch's loss (JaSMin ${reduce}) add up to the whole batch's, and so do the gradients`, () => {
    const model = createModel(tinyText({ vocabSize: 30, maxLength: 6 }), 3);
    const b = 6;
    const n = 6;
    const ids = tf.tensor2d(Array.from({ length: b * n }, (_, i) => (i % n === 0 ? 1 : 3 + ((i * 7) % 25))), [b, n], "int32");
    // Lengths 6, 2, 4, 1, 5, 3: slices with different padding.
    const lengths = [6, 2, 4, 1, 5, 3];
    const maskValues = Array.from({ length: b * n }, (_, i) => (i % n < lengths[Math.floor(i / n)] ? 1 : 0));
    const mask = tf.tensor2d(maskValues, [b, n]);
    const labels = tf.tensor1d([0, 1, 1, 0, 1, 0], "int32");
    const jasmin = { ...JASMIN, reduce };
    try {
      const whole = tf.tidy(() => {
        const { grads, figures } = lossGradients(model, ids, labels, { jasmin, mask });
        return { grads: grads.map((g) => g.dataSync().slice()), figures: Array.from(figures.dataSync()) };
      });
      const totals = batchTotals(b, n, maskValues);
      assert.deepEqual(totals, { examples: 6, realExamples: 6, realRows: 21 });
      const parts = batchSlices(b, 4).map(({ start, size }) =>
        tf.tidy(() => {
          const { grads, figures } = lossGradients(model, tf.slice(ids, start, size), tf.slice(labels, start, size), {
            jasmin,
            mask: tf.slice(mask, start, size),
            totals,
          });
          return { grads: grads.map((g) => g.dataSync().slice()), figures: Array.from(figures.dataSync()) };
        }),
      );
      assert.equal(parts.length, 3);
      const figures = parts.reduce((a, p) => a.map((v, i) => v + p.figures[i]), [0, 0, 0, 0, 0]);
      // cross-entropy, JaSMin, mean sigma, correct, loss
      for (let i = 0; i < 5; i++)
        assert.ok(Math.abs(figures[i] - whole.figures[i]) <= 1e-5 * Math.max(1, Math.abs(whole.figures[i])), `figure ${i}: ${figures[i]} vs ${whole.figures[i]}`);
      assert.ok(whole.figures[1] !== 0, "the JaSMin term is part of the loss");
      whole.grads.forEach((g, j) => {
        const sum = parts.reduce((acc, p) => acc.map((v, i) => v + p.grads[j][i]), new Float32Array(g.length));
        const scale = Math.max(1e-3, ...Array.from(g, Math.abs));
        assert.ok(maxDifference(sum, g as Float32Array) <= 1e-5 * scale, `gradient ${j}: differs by ${maxDifference(sum, g as Float32Array)} (scale ${scale})`);
      });
    } finally {
      tf.dispose([ids, mask, labels]);
      model.dispose();
    }
  });

/** A short ViT run on 96 embedded digits with JaSMin: 3 steps of 32 per epoch. */
async function digitRun(workers: number, extra: Partial<TrainOptions> = {}) {
  return trainInWorkers({ ...QUIET, data: "mnist", limit: 96, testLimit: 40, model: TINY, epochs: 2, batchSize: 32, lr: 3e-3, seed: 4, jasmin: { lambda: 0.5 }, ...extra, workers });
}

// Runs the tests below share (each costs worker threads and training): the 2-worker run, and a
// copy of the checkpoint a 2-worker run saved after epoch 1. Disposed once the file is done.
let twoWorkers: ReturnType<typeof digitRun> | undefined;
const twoWorkerRun = () => (twoWorkers ??= digitRun(2));
let epochOne: Promise<string> | undefined;
async function epochOneCheckpoint(): Promise<string> {
  epochOne ??= (async () => {
    const out = tempDir();
    (await digitRun(2, { out, stopAfterEpoch: 1 })).model.dispose();
    return out;
  })();
  const from = await epochOne;
  const copy = tempDir();
  for (const f of ["model.safetensors", "optimizer.safetensors", "train_state.json", "config.json", "fingerprints.json"])
    writeFileSync(join(copy, f), readFileSync(join(from, f)));
  return copy;
}
after(async () => (await twoWorkers)?.model.dispose());

test("a ViT trained by 2 workers is bit-identical when repeated and agrees with one thread to float32 rounding", async () => {
  const one = await digitRun(1);
  const two = await twoWorkerRun();
  const again = await digitRun(2);
  try {
    const [w1, w2, w2b] = [one, two, again].map((r) => flatWeights(r.model));
    assert.equal(maxDifference(w2, w2b), 0, "two runs with 2 workers differ");
    const d = maxDifference(w1, w2);
    assert.ok(d < 1e-3, `weights after 6 steps differ by ${d} between 1 and 2 workers`);
    const [h1, h2] = [one, two].map((r) => r.trainState.history.at(-1)!);
    assert.ok(Math.abs(h1.trainLoss - h2.trainLoss) < 1e-4, `train loss ${h1.trainLoss} vs ${h2.trainLoss}`);
    assert.ok(Math.abs(h1.meanSigma - h2.meanSigma) < 1e-5, `mean sigma ${h1.meanSigma} vs ${h2.meanSigma}`);
    assert.equal(h2.workers, 2);
    assert.equal(h1.workers, undefined);
  } finally {
    for (const r of [one, again]) r.model.dispose();
  }
});

test("a run stopped after epoch 1 with 2 workers resumes bit-exactly with 2 workers, and with 1 worker to float32 rounding", async () => {
  const straight = await twoWorkerRun();
  const out = await epochOneCheckpoint();
  const copy = await epochOneCheckpoint();
  const resumed = await trainInWorkers({ ...QUIET, resume: out, workers: 2 });
  const resumedOne = await trainInWorkers({ ...QUIET, resume: copy, workers: 1 });
  try {
    assert.equal(resumed.trainState.epoch, 2);
    assert.equal(maxDifference(flatWeights(resumed.model), flatWeights(straight.model)), 0);
    const d = maxDifference(flatWeights(resumedOne.model), flatWeights(straight.model));
    assert.ok(d < 1e-3, `resumed with 1 worker: differs by ${d}`);
    assert.deepEqual(resumedOne.trainState.history.map((h) => h.workers), [2, undefined]);
  } finally {
    for (const r of [resumed, resumedOne]) r.model.dispose();
  }
});

test("a padded text model trained on a CSV file by 2 workers agrees with one thread", async () => {
  const dir = tempDir("attnlip-parallel-text-");
  const rows = ["text,label"];
  for (let i = 0; i < 40; i++)
    rows.push(i % 3 === 0 ? `${wordPair(i)} win free money now,spam` : `${wordPair(i)} notes ${"and more ".repeat(i % 5)},ham`);
  const csv = join(dir, "mail.csv");
  writeFileSync(csv, rows.join("\n") + "\n");
  const run = (workers: number) =>
    trainInWorkers({ ...QUIET, data: `csv:${csv}`, model: JSON.stringify(tinyText({ vocabSize: 40, maxLength: 16 })), epochs: 1, batchSize: 10, lr: 3e-3, jasmin: { lambda: 0.2 }, workers });
  const one = await run(1);
  const two = await run(2);
  try {
    const d = maxDifference(flatWeights(one.model), flatWeights(two.model));
    assert.ok(d < 1e-3, `weights differ by ${d}`);
    const [h1, h2] = [one, two].map((r) => r.trainState.history[0]);
    assert.ok(Math.abs(h1.trainLoss - h2.trainLoss) < 1e-4, `train loss ${h1.trainLoss} vs ${h2.trainLoss}`);
    assert.ok(Math.abs(h1.meanSigma - h2.meanSigma) < 1e-5, `mean sigma ${h1.meanSigma} vs ${h2.meanSigma}`);
  } finally {
    one.model.dispose();
    two.model.dispose();
  }
});

test("a worker that throws on its slice stops the run with its message; the last checkpoint stays intact", async () => {
  const out = await epochOneCheckpoint();
  const saved = ["model.safetensors", "optimizer.safetensors", "train_state.json"].map((f) => readFileSync(join(out, f)));
  // The second slice of the first step of epoch 2 gets a label the model has no class for.
  const stepper = workerStepper({ workers: 2 });
  await assert.rejects(
    trainInWorkers({
      ...QUIET,
      resume: out,
      stepper: async (run) => {
        const inner = await stepper(run);
        return {
          ...inner,
          step: (batch, settings) => inner.step({ ...batch, labels: batch.labels.map((l, i) => (i === batch.size - 1 ? 99 : l)) }, settings),
        };
      },
    }),
    (e: unknown) => {
      assert.match((e as Error).message, /^in a worker: .*label/, String(e));
      return true;
    },
  );
  ["model.safetensors", "optimizer.safetensors", "train_state.json"].forEach((f, i) => assert.deepEqual(readFileSync(join(out, f)), saved[i], `${f} changed`));
  const reloaded = await loadCheckpoint(out);
  assert.equal(reloaded.trainState.epoch, 1);
  reloaded.model.dispose();
});

test("more workers than a batch has examples: the pool has one thread per example, and the history records that count", async () => {
  const r = await digitRun(8, { batchSize: 3, limit: 12, epochs: 1 });
  try {
    assert.equal(r.trainState.history[0].workers, 3);
    assert.equal(r.trainState.step, 4);
  } finally {
    r.model.dispose();
  }
});

