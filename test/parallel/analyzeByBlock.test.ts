// Issue 35: one input of a large model is the usual case, so with too few inputs for a slice
// per worker the work is split by block: the bounds in one worker, the block and head true
// values of groups of blocks in the others. The result must be the single-thread analysis,
// value for value.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { analyze, type StageProgress } from "../../src/analysis/analyze.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { analyzeInWorkers } from "../../src/parallel/analyzeTask.ts";

await useBackend("wasm");

/** An analysis without its timings (the only field that may differ between runs). */
const values = (a: object) => JSON.stringify({ ...a, seconds: null });

test("one BERT-shaped input (post-LN, pooler, padding) split by block over 2 workers gives the single-thread analysis, with progress by block", async () => {
  const model = createModel(
    { kind: "text", vocabSize: 40, maxLength: 8, dModel: 8, heads: 2, blocks: 5, mlpHidden: 16, classes: 2, norm: "post", embeddingNorm: true, finalNorm: false, pooler: "tanh", tokenTypes: 2 },
    7,
  ) as TransformerClassifier;
  const ids = tf.tensor2d([[1, 9, 4, 22, 3, 0, 0]], [1, 7], "int32");
  const mask = tf.tensor2d([[1, 1, 1, 1, 1, 0, 0]], [1, 7]);
  try {
    const options = { mask, maxIterations: 60, seed: 2 };
    const one = analyze(model, ids, options);
    assert.ok(one.blocks.every((b) => Number.isFinite(b.true[0]) && b.heads.every((h) => Number.isFinite(h.true[0]))));
    assert.ok(Number.isFinite(one.compositionFloor[0]));
    const stages: StageProgress[] = [];
    const two = await analyzeInWorkers(model, ids, { ...options, workers: 2, onStage: (p) => stages.push(p) });
    assert.equal(values(two), values(one));
    const truth = stages.filter((s) => s.stage === "true values");
    assert.equal(truth.at(-1)?.done, 5, "every block's true values reported");
    assert.equal(truth.at(-1)?.total, 5);
  } finally {
    tf.dispose([ids, mask]);
    model.dispose();
  }
});

test("two causal inputs with heads' true values only, split by block over 3 workers, give the single-thread analysis", async () => {
  const model = createModel({ kind: "text", vocabSize: 30, maxLength: 6, dModel: 8, heads: 2, blocks: 3, mlpHidden: 8, classes: 3, causal: true, pooling: "last" }, 4) as TransformerClassifier;
  const ids = tf.tensor2d([[2, 5, 7, 1], [3, 3, 8, 9]], [2, 4], "int32");
  try {
    const options = { maxIterations: 40, truth: { blocks: false } };
    const one = analyze(model, ids, options);
    const three = await analyzeInWorkers(model, ids, { ...options, workers: 3 });
    assert.equal(values(three), values(one));
    assert.ok(Number.isNaN(three.blocks[0].true[0]) && Number.isFinite(three.blocks[0].heads[1].true[1]));
  } finally {
    ids.dispose();
    model.dispose();
  }
});
