import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { runAnalyze } from "../../src/pipelines/analyzeRun.ts";
import { CLS_ID } from "../../src/data/text/tokenizer.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import { TextClassifier } from "../../src/nn/textClassifier.ts";
import {
  embeddingLogits,
  evaluateTextRobustness,
  fgsmEmbedding,
  pgdEmbedding,
  textLipschitzProxy,
} from "../../src/robustness/embedding.ts";
import { crossEntropySum } from "../../src/robustness/loss.ts";
import { APGD_ATTACK } from "../../src/robustness/apgd.ts";
import { embeddingBatch, NO_CLIP } from "../../src/robustness/inputSpace.ts";
import { resolveAttackOptions } from "../../src/robustness/options.ts";
import { runAttack } from "../../src/pipelines/attackRun.ts";
import { train } from "../../src/train/trainer.ts";
import { randomizeWeights } from "../nn/helpers.ts";
import { QUIET, tempDir } from "../train/helpers.ts";

await useBackend("wasm");

const TINY_TEXT = {
  kind: "text",
  vocabSize: 300,
  maxLength: 16,
  dModel: 16,
  heads: 2,
  blocks: 1,
  mlpHidden: 32,
  classes: 2,
  pooling: "cls",
} as const;

function batch() {
  const ids = tf.tensor2d(
    [
      [CLS_ID, 5, 6, 7, 8, 9],
      [CLS_ID, 20, 21, 0, 0, 0],
      [CLS_ID, 30, 0, 0, 0, 0],
      [CLS_ID, 40, 41, 42, 43, 0],
    ],
    [4, 6],
    "int32",
  );
  const mask = tf.tidy(() => tf.cast(tf.notEqual(ids, 0), "float32"));
  return { ids, mask };
}

test("embedding-space PGD, APGD (l_inf, l_2) and FGSM: padding rows untouched, inside the ball, no clipping, loss up", () => {
  const m = new TextClassifier(TINY_TEXT, 1);
  randomizeWeights(m, 2, 0.4);
  const inputs = batch();
  const labels = [0, 1, 0, 1];
  const before = tf.memory().numTensors;
  const e0 = m.tokenEmbeddings(inputs.ids);
  const e0Data = e0.arraySync() as number[][][];
  const maskData = inputs.mask.arraySync() as number[][];
  const loss = (e: tf.Tensor) =>
    tf.tidy(
      () =>
        crossEntropySum(
          embeddingLogits(m, inputs.mask)(e),
          tf.tensor1d(labels, "int32"),
        ).dataSync()[0],
    );
  const clean = loss(e0);
  for (const [norm, eps] of [
    ["linf", 0.3],
    ["l2", 2],
  ] as const) {
    for (const adv of [
      pgdEmbedding(m, inputs, labels, { norm, eps, steps: 5, seed: 3 }),
      fgsmEmbedding(m, inputs, labels, { norm, eps }),
      apgdEmbedding(m, inputs, labels, norm, eps),
    ]) {
      const a = adv.arraySync() as number[][][];
      let sq = [0, 0, 0, 0];
      let outside = false;
      a.forEach((rows, b) =>
        rows.forEach((row, i) =>
          row.forEach((v, k) => {
            const d = v - e0Data[b][i][k];
            if (maskData[b][i] === 0) assert.equal(d, 0, "padding row moved");
            if (norm === "linf") assert.ok(Math.abs(d) <= eps * (1 + 1e-5));
            sq[b] += d * d;
            if (v < 0 || v > 1) outside = true;
          }),
        ),
      );
      if (norm === "l2") for (const s of sq) assert.ok(Math.sqrt(s) <= eps * (1 + 1e-5));
      assert.ok(outside, "values outside [0, 1]: no clipping in embedding space");
      assert.ok(loss(adv) > clean, `${norm}: the loss went up`);
      sq = [0, 0, 0, 0];
      adv.dispose();
    }
  }
  e0.dispose();
  assert.equal(tf.memory().numTensors, before);
  tf.dispose([inputs.ids, inputs.mask]);
  m.dispose();
});

/** APGD in embedding space through its registered run, as evaluateTextRobustness calls it. */
function apgdEmbedding(m: TextClassifier, inputs: { ids: tf.Tensor; mask: tf.Tensor }, labels: number[], norm: "linf" | "l2", eps: number): tf.Tensor {
  const batch = embeddingBatch(m, inputs);
  const y = tf.tensor1d(labels, "int32");
  try {
    const settings = resolveAttackOptions({ norm, eps, steps: 5, seed: 3, clip: NO_CLIP }, "apgd");
    return APGD_ATTACK.run({ batch, kind: "embedding", labels: y, settings, who: "apgd" });
  } finally {
    batch.dispose();
    y.dispose();
  }
}

test("evaluateTextRobustness: eps 0 is the clean accuracy, robust <= clean; the proxy is margin / (sqrt 2 L)", () => {
  const m = new TextClassifier(TINY_TEXT, 4);
  randomizeWeights(m, 5, 0.4);
  const inputs = batch();
  const before = tf.memory().numTensors;
  const clean = tf.tidy(() =>
    Array.from(tf.argMax(m.forward(inputs.ids, { mask: inputs.mask }).logits, 1).dataSync()),
  );
  const labels = clean.map((c, i) => (i === 3 ? 1 - c : c)); // three right, one wrong
  const r = evaluateTextRobustness(m, inputs, labels, {
    eps: [0, 0.05, 5],
    norm: "l2",
    steps: 5,
    batchSize: 3,
  });
  assert.equal(r.cleanAccuracy, 0.75);
  assert.equal(r.results[0].attacks.pgd!.robustAccuracy, 0.75);
  for (const x of r.results)
    assert.ok(x.attacks.pgd!.robustAccuracy <= 0.75 && x.attacks.fgsm!.robustAccuracy <= 0.75);
  assert.ok(r.results[2].attacks.pgd!.robustAccuracy <= r.results[1].attacks.pgd!.robustAccuracy);
  const p = textLipschitzProxy(m, inputs, labels, { batchSize: 2 });
  const L = networkLipschitz(m, inputs.ids, { mask: inputs.mask });
  assert.equal(p.misclassified, 1);
  assert.equal(p.radii[3], 0);
  for (let i = 0; i < 3; i++) {
    assert.ok(Math.abs(p.lipschitz[i] - L[i]) <= 1e-4 * L[i]);
    assert.ok(Math.abs(p.radii[i] - p.margins[i] / (Math.SQRT2 * p.lipschitz[i])) <= 1e-9);
  }
  assert.equal(tf.memory().numTensors, before);
  tf.dispose([inputs.ids, inputs.mask]);
  m.dispose();
});

test("programmatic train / runAnalyze / runAttack on spam (tiny text model)", async () => {
  const dir = tempDir("attnlip-spam-");
  const out = join(dir, "run");
  const r = await train({
    ...QUIET,
    data: "spam",
    model: JSON.stringify({ ...TINY_TEXT, vocabSize: 2000, maxLength: 32 }),
    epochs: 1,
    limit: 256,
    testLimit: 32,
    batchSize: 32,
    lr: 3e-3,
    out,
  });
  r.model.dispose();
  const log = console.log;
  const err = console.error;
  console.log = () => {};
  console.error = () => {};
  try {
    const analysis = await runAnalyze({
      checkpoint: out,
      data: "spam",
      model: "text-tiny",
      seed: 0,
      n: 2,
      out: join(dir, "analysis"),
      backend: "wasm",
      mlp: "local",
      headTruth: false,
      blockTruth: false,
      iterations: 10,
      print: false,
    });
    assert.equal(analysis.inputSpace, "embedding");
    const doc = JSON.parse(readFileSync(join(dir, "analysis", "analysis.json"), "utf8"));
    assert.equal(doc.inputSpace, "embedding");
    const attack = await runAttack({ checkpoint: out, data: "spam", n: 8, steps: 2, norm: "l2" });
    assert.equal(attack.data, "spam");
    assert.equal(attack.n, 8);
    assert.deepEqual(
      attack.results.map((x) => x.eps),
      [0, 0.05, 0.1, 0.25],
    );
    assert.equal(attack.results[0].robust.pgd, attack.cleanAccuracy);
    assert.equal(attack.proxy.radii.length, 8);
    assert.ok(existsSync(join(out, "attack.json")));
    await assert.rejects(
      runAttack({ checkpoint: out, data: "mnist", n: 2 }),
      /"mnist" is image data; a text model reads text data \(spam \| csv:FILE \| jsonl:FILE\)/,
    );
  } finally {
    console.log = log;
    console.error = err;
  }
});
