// The time estimate printed before a long analysis (issue 35: "an estimate of the remaining time
// before a long run starts"): its stages follow the run's options, and at the speed the scale
// bench measured it lands within 35% of every stage the bench timed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { estimateAnalysis, estimateLine, REFERENCE_KERNEL_SECONDS, type EstimatePlan } from "../../src/analysis/estimate.ts";
import { duration } from "../../src/util/stageProgress.ts";

const BERT: EstimatePlan = {
  blocks: 12,
  heads: 12,
  dModel: 768,
  mlpHidden: 3072,
  tokens: 128,
  classes: 2,
  preNorm: false,
  inputs: 1,
  variants: ["t3-half", "t3-exact"],
  mlp: "relaxed",
  blockTruth: true,
  headTruth: true,
  iterations: 1000,
  weightNormsCached: true,
  workers: 1,
};
const SPEED = { forwardSeconds: 1, kernelSeconds: REFERENCE_KERNEL_SECONDS };
const stage = (plan: EstimatePlan, name: string) =>
  estimateAnalysis(plan, SPEED).stages.find((s) => s.stage === name)?.seconds;

test("the estimate's stages follow the options: cov/fused, the exact MLP, the true values, cold weight norms", () => {
  const names = (plan: EstimatePlan) => estimateAnalysis(plan, SPEED).stages.map((s) => s.stage);
  assert.deepEqual(names(BERT), ["bounds", "network true value", "block true values", "head true values"]);
  assert.ok(names({ ...BERT, variants: ["fused"] }).includes("bounds: cov and fused"));
  assert.ok(names({ ...BERT, mlp: "local" }).includes("bounds: exact MLP"));
  assert.deepEqual(names({ ...BERT, blockTruth: false, headTruth: false }), ["bounds", "network true value"]);
  assert.equal(names({ ...BERT, weightNormsCached: false })[0], "weight norms (once per checkpoint)");
});

test("the estimate grows with the inputs, the tokens and the slower machine, and workers shorten all but the network's true value", () => {
  const one = estimateAnalysis(BERT, SPEED);
  const four = estimateAnalysis({ ...BERT, inputs: 4 }, SPEED);
  assert.ok(Math.abs(four.total - 4 * one.total) < 1e-9 * four.total);
  assert.ok(Math.abs(four.perInput - one.perInput) < 1e-9 * one.perInput);
  const fused = { ...BERT, variants: ["fused"] };
  assert.ok(stage({ ...fused, tokens: 256 }, "bounds: cov and fused")! > stage(fused, "bounds: cov and fused")!);
  const slow = estimateAnalysis(BERT, { forwardSeconds: 2, kernelSeconds: 2 * REFERENCE_KERNEL_SECONDS });
  assert.ok(Math.abs(slow.total - 2 * one.total) < 1e-9 * slow.total);
  const two = { ...BERT, workers: 2 };
  assert.equal(stage(two, "network true value"), stage(BERT, "network true value"));
  assert.ok(stage(two, "block true values")! < stage(BERT, "block true values")!);
  // --iterations below the typical 40 products caps the true values' estimate.
  assert.ok(stage({ ...BERT, iterations: 10 }, "block true values")! < stage(BERT, "block true values")!);
});

test("a bad plan or speed is refused with the field named", () => {
  assert.throws(() => estimateAnalysis({ ...BERT, tokens: 0 }, SPEED), /plan\.tokens must be a positive integer, got 0/);
  assert.throws(() => estimateAnalysis({ ...BERT, workers: 1.5 }, SPEED), /plan\.workers/);
  assert.throws(() => estimateAnalysis(BERT, { ...SPEED, forwardSeconds: NaN }), /speed\.forwardSeconds must be a positive finite number/);
  assert.throws(() => estimateAnalysis(BERT, { ...SPEED, kernelSeconds: 0 }), /speed\.kernelSeconds/);
});

test("the line names the total and the stages", () => {
  const line = estimateLine(estimateAnalysis({ ...BERT, inputs: 3 }, SPEED), 3, duration);
  assert.match(line, /^estimated time: about \d+(\.\d)? (s|min|h) for 3 inputs \(bounds .*network true value .*block true values .*head true values/);
});

// The bench's measured stage times (bench/results/scale.json) against the estimate at the speed
// that run had: its forward trace and the reference kernel time.
interface BenchModel {
  model: string;
  config: { blocks: number; heads: number; dModel: number; mlpHidden: number; classes: number; norm?: string; kind: string; imageSize?: number; patchSize?: number; maxLength?: number };
  stages: { stage: string; seconds: number }[];
}
test("at the scale bench's speed, each stage's estimate is within 35% of what the bench measured on BERT-base, ViT-B/16 and GPT-2 small", () => {
  const bench = JSON.parse(readFileSync("bench/results/scale.json", "utf8")) as { models: BenchModel[] };
  assert.equal(bench.models.length, 3);
  for (const m of bench.models) {
    const measured = (prefix: string) => {
      const s = m.stages.find((x) => x.stage.startsWith(prefix));
      assert.ok(s, `${m.model}: bench stage "${prefix}"`);
      return s.seconds;
    };
    const c = m.config;
    const plan: EstimatePlan = {
      blocks: c.blocks,
      heads: c.heads,
      dModel: c.dModel,
      mlpHidden: c.mlpHidden,
      tokens: c.kind === "vit" ? (c.imageSize! / c.patchSize!) ** 2 + 1 : 128,
      classes: c.classes,
      preNorm: c.norm === "pre",
      inputs: 1,
      variants: ["cov", "fused"],
      mlp: "local",
      blockTruth: true,
      headTruth: true,
      iterations: 40,
      weightNormsCached: false,
      workers: 1,
    };
    const estimate = estimateAnalysis(plan, { forwardSeconds: measured("forward trace"), kernelSeconds: REFERENCE_KERNEL_SECONDS });
    const est = (name: string) => estimate.stages.find((s) => s.stage === name)!.seconds;
    const cached = measured("t3-half + t3-exact, weight norms cached");
    const pairs: [string, number, number][] = [
      ["bounds", est("bounds"), cached],
      ["cold weight norms", est("weight norms (once per checkpoint)"), measured("t3-half + t3-exact, every block and the network, cold") - cached],
      ["cov and fused", est("bounds: cov and fused"), measured("every variant in one run") - cached],
      ["exact MLP", est("bounds: exact MLP"), measured("exact local MLP")],
      ["network true value", est("network true value"), measured("network true value")],
      ["block true values", est("block true values"), measured("block true values, every block")],
      ["head true values", est("head true values"), measured("head true values")],
    ];
    for (const [name, e, actual] of pairs) {
      assert.ok(e / actual > 1 / 1.35 && e / actual < 1.35, `${m.model} ${name}: estimated ${e.toFixed(1)} s, measured ${actual.toFixed(1)} s`);
    }
  }
});
