import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { tf, useBackend } from "../src/backend.ts";
import { analyze } from "../src/analysis/analyze.ts";
import { loadEmbeddedMnist } from "../src/data/mnist.ts";
import { modelPreset } from "../src/nn/config.ts";
import { createModel } from "../src/nn/create.ts";
import type { TransformerClassifier } from "../src/nn/model.ts";
import { analyzeInWorkers } from "../src/parallel/analyzeTask.ts";
import { attackInWorkers } from "../src/parallel/attackTask.ts";
import { trainInWorkers } from "../src/parallel/trainTask.ts";
import { IMAGE_INPUTS } from "../src/robustness/modelInputs/index.ts";
import { renderTable } from "../src/util/table.ts";

/**
 * Issue 12's benchmark of work in worker threads. Analysis: `attnlip analyze`'s work (every bound, network, block and
 * head true values) on 16 embedded digits with vit-tiny, in this thread and over 2 workers
 * (the worker time includes starting the pool), as a throughput ratio against the single
 * thread, in the same run; attacks likewise (FGSM and PGD-10 at 3 radii on 64 digits, 2
 * batches); training likewise (vit-tiny, 20 steps of 64 embedded digits, JaSMin on, the
 * steady throughput of steps 3 to 20 from metrics.jsonl, and that of all steps). The process's peak resident memory (worker threads included) is reported after each,
 * and the growth per worker as the peak with 2 workers minus the peak before, halved.
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
  // Training: 20 steps of 64 digits with JaSMin (lambda 0.1), as `attnlip train --model vit-tiny --batch 64` runs them.
  // Throughput over steps 3 to 20 (metrics.jsonl's cumulative step times): the first steps of
  // a fresh worker grow its wasm memory, which this thread has already done.
  const steadyRate = async (workers: number) => {
    const out = join(mkdtempSync(join(tmpdir(), "attnlip-bench-")), "run");
    const r = await trainInWorkers({ data: "mnist", model: "vit-tiny", epochs: 1, limit: 1280, testLimit: 50, batchSize: 64, jasmin: { lambda: 0.1 }, progress: "none", log: () => {}, out, workers });
    r.model.dispose();
    const steps = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l)).filter((m) => m.type === "step");
    rmSync(dirname(out), { recursive: true, force: true });
    const from = steps[1];
    const to = steps.at(-1);
    return { seconds: to.time - from.time, imagesPerSecond: (64 * (steps.length - 2)) / (to.time - from.time), all: r.imagesPerSecond };
  };
  const rssTrain0 = peak();
  const trainOne = await steadyRate(1);
  const rssTrain1 = peak();
  const trainTwo = await steadyRate(2);
  const rssTrain2 = peak();
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
  const trainSpeedUp = trainTwo.imagesPerSecond / trainOne.imagesPerSecond;
  console.log(`train, vit-tiny, steps 3-20 of 64 digits, JaSMin 0.1: training-step throughput relative to one thread (all 20 steps: ${trainOne.all.toFixed(1)} vs ${trainTwo.all.toFixed(1)} images/s)`);
  console.log(
    renderTable(
      ["workers", "step seconds", "images/s", "speed-up", "peak rss MiB so far"],
      [
        ["1 (this thread, reference)", trainOne.seconds, trainOne.imagesPerSecond, 1, rssTrain1],
        ["2 workers", trainTwo.seconds, trainTwo.imagesPerSecond, trainSpeedUp, rssTrain2],
      ],
    ),
  );
  const perWorker = Math.max(rssTrain2 - rssTrain1, rss2 - rss1) / 2;
  console.log(`peak memory added per worker: about ${perWorker.toFixed(0)} MiB (peak rss with 2 workers minus the peak before them, halved)`);
  return {
    inputs: n,
    cores: availableParallelism(),
    seconds: { one: single, twoWorkers: two },
    speedUp: single / two,
    attack: { inputs: 64, seconds: { one: attackOne, twoWorkers: attackTwo }, speedUp: attackOne / attackTwo },
    train: {
      steps: 20,
      measuredSteps: "3-20",
      batch: 64,
      imagesPerSecond: { one: trainOne.imagesPerSecond, twoWorkers: trainTwo.imagesPerSecond },
      imagesPerSecondAllSteps: { one: trainOne.all, twoWorkers: trainTwo.all },
      speedUp: trainSpeedUp,
    },
    peakRssMiB: { start: rss0, afterOne: rss1, afterTwoWorkers: rss2, afterAttacks: rss3, beforeTraining: rssTrain0, afterTrainingOne: rssTrain1, afterTrainingTwo: rssTrain2 },
    perWorkerMiB: perWorker,
  };
}
