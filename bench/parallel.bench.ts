import { availableParallelism } from "node:os";
import { tf, useBackend } from "../src/backend.ts";
import { analyze } from "../src/analysis/analyze.ts";
import { loadEmbeddedMnist } from "../src/data/mnist.ts";
import { modelPreset } from "../src/nn/config.ts";
import { createModel } from "../src/nn/create.ts";
import type { TransformerClassifier } from "../src/nn/model.ts";
import { analyzeInWorkers } from "../src/parallel/analyzeTask.ts";
import { renderTable } from "../src/util/table.ts";

/**
 * Issue 12's analysis benchmark: `attnlip analyze`'s work (every bound, network, block and
 * head true values) on 16 embedded digits with vit-tiny, in this thread and over 2 workers
 * (the worker time includes starting the pool), as a throughput ratio against the single
 * thread, in the same run. The process's peak resident memory (worker threads included) is
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
  x.dispose();
  model.dispose();
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
    peakRssMiB: { start: rss0, afterOne: rss1, afterTwoWorkers: rss2 },
  };
}
