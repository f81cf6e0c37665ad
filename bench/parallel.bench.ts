import { availableParallelism } from "node:os";
import { tf, useBackend } from "../src/backend.ts";
import { analyze } from "../src/analysis/analyze.ts";
import { loadEmbeddedMnist } from "../src/data/mnist.ts";
import { modelPreset } from "../src/nn/config.ts";
import { createModel } from "../src/nn/create.ts";
import type { TransformerClassifier } from "../src/nn/model.ts";
import { analyzeInWorkers } from "../src/parallel/analyzeTask.ts";
import { attackInWorkers } from "../src/parallel/attackTask.ts";
import { IMAGE_INPUTS } from "../src/robustness/modelInputs/index.ts";
import { renderTable } from "../src/util/table.ts";

/**
 * Issue 12's benchmark of work in worker threads. Analysis: `attnlip analyze`'s work (every bound, network, block and
 * head true values) on 16 embedded digits with vit-tiny, in this thread and over 2 workers
 * (the worker time includes starting the pool), as a throughput ratio against the single
 * thread, in the same run; attacks likewise (FGSM and PGD-10 at 3 radii on 64 digits, 2
 * batches). The process's peak resident memory (worker threads included) is
 * reported after each.
 */
export async function benchParallel(): Promise<Record<string, unknown>> {
  await useBackend("wasm");
  const n = 16;
  const model = createModel(modelPreset("vit-tiny"), 0) as TransformerClassifier;
  const digits = loadEmbeddedMnist({ seed: 0, trainSize: 10, testSize: n }).test;
  const x = tf.tensor4d(digits.images, [n, 28, 28, 1]);
  const options = { maxIterations: 1000, seed: 0 };
  const peak = () => process.resourceUsage().maxRSS / 1024; // MiB, the process's peak so far
  const rss0 = peak();
  let t = performance.now();
  analyze(model, x, options);
  const single = (performance.now() - t) / 1000;
  const rss1 = peak();
  t = performance.now();
  await analyzeInWorkers(model, x, { ...options, workers: 2 });
  const two = (performance.now() - t) / 1000;
  const rss2 = peak();
  // Attacks: PGD (10 steps) and FGSM at 3 radii on 64 digits, batches of 32, as `attnlip attack` runs them.
  const inputs = await IMAGE_INPUTS.load(model, { who: "bench", data: "mnist", trained: null, seed: 0, n: 64 }, {});
  const attackOptions = { eps: [0, 0.05, 0.1, 0.2], steps: 10, batchSize: 32, seed: 0 };
  t = performance.now();
  await attackInWorkers(model, inputs, { ...attackOptions, workers: 1 });
  const attackOne = (performance.now() - t) / 1000;
  t = performance.now();
  await attackInWorkers(model, inputs, { ...attackOptions, workers: 2 });
  const attackTwo = (performance.now() - t) / 1000;
  const rss3 = peak();
  inputs.dispose();
  x.dispose();
  model.dispose();
  console.log(`attack, vit-tiny, 64 digits, FGSM + PGD-10 at 3 radii, batches of 32: 1 thread ${attackOne.toFixed(1)} s, 2 workers ${attackTwo.toFixed(1)} s (speed-up ${(attackOne / attackTwo).toFixed(2)}x)`);
  const rows = [
    ["1 (this thread, reference)", single, n / single, 1, rss1],
    ["2 workers (pool start included)", two, n / two, single / two, rss2],
  ];
  console.log(`analyze, vit-tiny, ${n} digits, every true value, wasm, ${availableParallelism()} cores: throughput relative to one thread`);
  console.log(renderTable(["workers", "seconds", "inputs/s", "speed-up", "peak rss MiB so far"], rows));
  return {
    inputs: n,
    cores: availableParallelism(),
    seconds: { one: single, twoWorkers: two },
    speedUp: single / two,
    attack: { inputs: 64, seconds: { one: attackOne, twoWorkers: attackTwo }, speedUp: attackOne / attackTwo },
    peakRssMiB: { start: rss0, afterOne: rss1, afterTwoWorkers: rss2, afterAttacks: rss3 },
  };
}
