import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { batches, SeededRng, shuffledOrder } from "../../src/data/dataset.ts";
import { createModel } from "../../src/nn/create.ts";
import { meanAttentionSigma } from "../../src/train/evaluate.ts";
import { AdamW, clipByGlobalNorm, decaysWeight } from "../../src/train/optimizer.ts";
import { learningRateAt } from "../../src/train/schedule.ts";
import { train, trainStep, type JasminSettings } from "../../src/train/trainer.ts";
import { digits, QUIET, tempDir, TINY } from "./helpers.ts";

await useBackend("wasm");

const NO_JASMIN: JasminSettings = { lambda: 0, norm: "top2", reduce: "max-log", layers: null };

test("a tiny ViT's loss falls on 512 embedded digits within 48 steps; metrics.jsonl has a record per step and epoch", async () => {
  const dataset = await digits(512, 256);
  const out = tempDir();
  const r = await train({ ...QUIET, dataset, model: TINY, epochs: 3, batchSize: 32, lr: 3e-3, seed: 1, out });
  const lines = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const steps = lines.filter((l) => l.type === "step");
  const epochs = lines.filter((l) => l.type === "epoch");
  assert.equal(steps.length, 48);
  assert.equal(epochs.length, 3);
  for (const key of ["epoch", "step", "loss", "crossEntropy", "jasmin", "accuracy", "meanSigma", "lr", "time"])
    assert.ok(key in steps[0], `step record has ${key}`);
  assert.ok("testAccuracy" in epochs[0]);
  const meanCe = (xs: { crossEntropy: number }[]) => xs.reduce((a, x) => a + x.crossEntropy, 0) / xs.length;
  const first = meanCe(steps.slice(0, 5));
  const last = meanCe(steps.slice(-5));
  assert.ok(last < first - 0.5, `cross-entropy ${first.toFixed(3)} -> ${last.toFixed(3)}`);
  assert.ok(r.finalTestAccuracy > 0.25, `test accuracy ${r.finalTestAccuracy}`);
  assert.equal(r.trainState.epoch, 3);
  assert.equal(r.trainState.step, 48);
  r.model.dispose();
});

test("with the same seed and steps, JaSMin (lambda 0.5) gives a lower mean sigma than lambda 0", async () => {
  const dataset = await digits(512, 256);
  const run = async (lambda: number) => {
    const r = await train({ ...QUIET, dataset, model: TINY, epochs: 2, batchSize: 32, lr: 3e-3, seed: 2, jasmin: { lambda } });
    const sigma = meanAttentionSigma(r.model, dataset.test, { limit: 256 });
    const trainSigma = r.trainState.history.at(-1)!.meanSigma;
    r.model.dispose();
    return { sigma, trainSigma, accuracy: r.finalTestAccuracy };
  };
  const base = await run(0);
  const reg = await run(0.5);
  assert.ok(reg.sigma < 0.9 * base.sigma, `test mean sigma: lambda 0 ${base.sigma}, lambda 0.5 ${reg.sigma}`);
  assert.ok(reg.trainSigma < base.trainSigma, `train mean sigma: ${base.trainSigma} vs ${reg.trainSigma}`);
});

test("tf.memory().numTensors stays flat across training steps (with JaSMin)", async () => {
  const dataset = await digits(512, 256);
  const model = createModel(TINY, 0);
  const optimizer = new AdamW(model.params.parameters(), { weightDecay: 0.05 });
  const jasmin: JasminSettings = { lambda: 0.3, norm: "top2", reduce: "max-log", layers: null };
  const counts: number[] = [];
  let k = 0;
  for (const batch of batches(dataset.train, null, 32)) {
    if (k++ === 6) break;
    const x = tf.tensor2d(batch.images, [batch.size, 784]);
    const y = tf.tensor1d(batch.labels, "int32");
    const m = trainStep(model, optimizer, x, y, { lr: 1e-3, clip: 1, jasmin });
    assert.ok(m.finite);
    tf.dispose([x, y]);
    counts.push(tf.memory().numTensors);
  }
  assert.ok(counts.every((c) => c === counts[0]), `numTensors per step: ${counts.join(", ")}`);
  optimizer.dispose();
  model.dispose();
});

test("trainStep does not update on a NaN loss; clipping bounds the update norm", () => {
  const model = createModel(TINY, 0);
  const optimizer = new AdamW(model.params.entries());
  const before = model.getWeights();
  const x = tf.fill([4, 784], NaN);
  const y = tf.tensor1d([0, 1, 2, 3], "int32");
  const m = trainStep(model, optimizer, x, y, { lr: 1e-3, clip: 1, jasmin: NO_JASMIN });
  assert.equal(m.finite, false);
  assert.equal(optimizer.step, 0);
  for (const [name, w] of model.getWeights()) assert.deepEqual(w.data, before.get(name)!.data);
  const g = [tf.tensor1d([3, 4]), tf.tensor1d([12])];
  const { clipped, norm } = clipByGlobalNorm(g, 1);
  assert.ok(Math.abs(norm.dataSync()[0] - 13) < 1e-5);
  assert.ok(Math.abs(tf.norm(tf.concat(clipped)).dataSync()[0] - 1) < 1e-6);
  tf.dispose([x, y, ...g, ...clipped, norm]);
  optimizer.dispose();
  model.dispose();
});

test("AdamW: one step matches the formula, with decoupled decay on weight matrices only", () => {
  const w = tf.variable(tf.tensor2d([[1, -2], [3, 0.5]]));
  const b = tf.variable(tf.tensor1d([1, -1]));
  const opt = new AdamW(
    [
      { name: "layer.w", variable: w, role: "weight" },
      { name: "layer.b", variable: b, role: "bias" },
    ],
    { weightDecay: 0.1 },
  );
  const gw = tf.tensor2d([[0.5, -1], [0, 2]]);
  const gb = tf.tensor1d([0.25, 0]);
  opt.apply([gw, gb], 0.01);
  // Step 1: m_hat = g, v_hat = g^2, so the Adam step is lr * g / (|g| + eps) = lr * sign(g).
  const expectW = [1 - 0.01 * 0.1 * 1 - 0.01, -2 + 0.01 * 0.1 * 2 + 0.01, 3 - 0.01 * 0.1 * 3, 0.5 - 0.01 * 0.1 * 0.5 - 0.01];
  const expectB = [1 - 0.01, -1];
  w.dataSync().forEach((v, i) => assert.ok(Math.abs(v - expectW[i]) < 1e-6, `w[${i}] ${v} vs ${expectW[i]}`));
  b.dataSync().forEach((v, i) => assert.ok(Math.abs(v - expectB[i]) < 1e-6, `b[${i}] ${v} vs ${expectB[i]}`));
  assert.deepEqual(opt.decayedNames(), ["layer.w"]);
  assert.equal(decaysWeight("embedding"), false);
  assert.equal(decaysWeight("weight"), true);
  const state = opt.getState();
  assert.equal(state.step, 1);
  tf.dispose([w, b, gw, gb]);
  opt.dispose();
});

test("schedule: linear warm-up then cosine decay to minLr", () => {
  const s = { lr: 1, warmupSteps: 4, totalSteps: 14, minLr: 0.1 };
  assert.equal(learningRateAt(0, s), 0.25);
  assert.equal(learningRateAt(3, s), 1);
  assert.ok(Math.abs(learningRateAt(4, s) - 1) < 1e-12);
  assert.ok(Math.abs(learningRateAt(9, s) - 0.55) < 1e-12);
  assert.ok(Math.abs(learningRateAt(14, s) - 0.1) < 1e-12);
  assert.ok(Math.abs(learningRateAt(100, s) - 0.1) < 1e-12);
  assert.throws(() => learningRateAt(-1, s), RangeError);
  // minLr is reached one step after the run's last update (step totalSteps), as documented.
  assert.ok(learningRateAt(s.totalSteps - 1, s) > (s.minLr ?? 0));
  assert.equal(learningRateAt(s.totalSteps, s), s.minLr ?? 0);
});

test("seeded shuffling: same seed, same order; the RNG state continues the stream", () => {
  const a = new SeededRng(7);
  const first = shuffledOrder(50, a);
  const resumed = new SeededRng(a.state);
  const b = new SeededRng(7);
  assert.deepEqual(shuffledOrder(50, b), first);
  assert.deepEqual(shuffledOrder(50, resumed), shuffledOrder(50, b));
  assert.deepEqual([...first].sort((x, y) => x - y), Array.from({ length: 50 }, (_, i) => i));
});
