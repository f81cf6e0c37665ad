// Progress lines for inputs that take minutes (issue 35): the stages an analysis reports and
// how the CLI's display words them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { analyze, type StageProgress } from "../../src/analysis/analyze.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { duration, stageLine, stageProgress } from "../../src/util/stageProgress.ts";

test("analyze reports every stage of every input: bounds layer by layer, the network's true value, true values block by block", async () => {
  await useBackend("wasm");
  const model = createModel({ kind: "text", vocabSize: 40, maxLength: 8, dModel: 8, heads: 2, blocks: 2, mlpHidden: 16, classes: 2 }, 1) as TransformerClassifier;
  const ids = tf.tensor2d([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]], [2, 6], "int32");
  const events: StageProgress[] = [];
  try {
    analyze(model, ids, { variants: ["t3-half", "t3-exact"], maxIterations: 5, onStage: (p) => events.push({ ...p }) });
  } finally {
    ids.dispose();
    model.dispose();
  }
  for (const input of [1, 2]) {
    const bounds = events.filter((e) => e.stage === "bounds" && e.input === input);
    // embedding, blocks.0, blocks.1, norm, head: the top-level layers of the trace.
    assert.deepEqual(bounds.map((e) => e.done), [1, 2, 3, 4, 5]);
    assert.ok(bounds.every((e) => e.total === 5 && e.unit === "layer"));
    assert.deepEqual(bounds.map((e) => e.name).slice(1, 3), ["blocks.0", "blocks.1"]);
    const truth = events.filter((e) => e.stage === "true values" && e.input === input);
    assert.deepEqual(truth.map((e) => [e.done, e.total, e.name]), [[1, 2, "block 0 and heads"], [2, 2, "block 1 and heads"]]);
    assert.ok(truth[1].seconds >= truth[0].seconds, "seconds are the stage's time so far");
  }
  assert.equal(events.filter((e) => e.stage === "network true value").length, 1, "one network value per batch");
});

test("a stage line says where the stage is and the time it has left at its pace so far", () => {
  assert.equal(
    stageLine({ stage: "bounds", input: 1, inputs: 1, done: 4, total: 16, unit: "layer", name: "blocks.2", seconds: 8 }),
    "input 1/1: bounds, layer 4/16 (blocks.2), 8 s, about 24 s left in this stage",
  );
  assert.equal(
    stageLine({ stage: "true values", input: 2, inputs: 3, done: 12, total: 12, unit: "block", name: "block 11 and heads", seconds: 200 }),
    "input 2/3: true values, block 12/12 (block 11 and heads), 3.3 min",
  );
  assert.deepEqual([duration(5), duration(600), duration(9000), duration(NaN)], ["5 s", "10.0 min", "2.5 h", "?"]);
});

test("off a terminal, progress is a plain line at most every 10 s, at the end of a long stage and at each quarter of the inputs, with the time left", () => {
  const lines: string[] = [];
  let clock = 0;
  const p = stageProgress("analyze", { interactive: false, write: (l) => lines.push(l), now: () => clock });
  const step = (done: number, seconds: number) => ({ stage: "bounds", input: 1, inputs: 4, done, total: 3, unit: "layer", name: `blocks.${done}`, seconds });
  clock = 4;
  p.onStage(step(1, 4)); // under 10 s since the start: quiet
  clock = 11;
  p.onStage(step(2, 11)); // 10 s passed: printed
  clock = 12;
  p.onStage(step(3, 12)); // the stage's end, over 5 s: printed
  p.onProgress(1, 4); // a quarter of the inputs
  p.end();
  assert.deepEqual(lines, [
    "analyze: input 1/4: bounds, layer 2/3 (blocks.2), 11 s, about 6 s left in this stage\n",
    "analyze: input 1/4: bounds, layer 3/3 (blocks.3), 12 s\n",
    "analyze: analyzed 1/4 inputs in 12 s, about 36 s left\n",
  ]);
});

test("on a terminal, one line is rewritten in place and ended with a newline", () => {
  const out: string[] = [];
  const p = stageProgress("analyze", { interactive: true, write: (l) => out.push(l), now: () => 0 });
  p.onStage({ stage: "bounds", input: 1, inputs: 1, done: 1, total: 2, unit: "layer", name: "embedding", seconds: 0 });
  p.onStage({ stage: "bounds", input: 1, inputs: 1, done: 2, total: 2, unit: "layer", name: "head", seconds: 0 });
  p.end();
  assert.ok(out[0].startsWith("\r  input 1/1: bounds, layer 1/2 (embedding)"));
  assert.ok(out[1].startsWith("\r  input 1/1: bounds, layer 2/2 (head)"));
  assert.ok(out[1].length >= out[0].length, "a shorter line is padded over the longer one");
  assert.equal(out.at(-1), "\n");
});
