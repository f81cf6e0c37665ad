import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { CLS_ID } from "../../src/data/text/tokenizer.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import { embeddingLookup } from "../../src/nn/embedding.ts";
import { TextClassifier } from "../../src/nn/textClassifier.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { jasminPenalty } from "../../src/train/jasmin.ts";
import { train } from "../../src/train/trainer.ts";
import { randomizeWeights, relError } from "../nn/helpers.ts";
import { QUIET, tempDir } from "./helpers.ts";
import { wordPair } from "../helpers/tinyText.ts";

await useBackend("wasm");

const TINY_TEXT = {
  kind: "text",
  vocabSize: 300,
  maxLength: 16,
  dModel: 16,
  heads: 2,
  blocks: 2,
  mlpHidden: 32,
  classes: 2,
  pooling: "cls",
} as const;

test("the embedding gradient works on wasm: ids [0,2,2] on a 3x2 table of ones, loss = sum", () => {
  assert.equal(tf.getBackend(), "wasm");
  const before = tf.memory().numTensors;
  const table = tf.ones([3, 2]);
  const ids = tf.tensor1d([0, 2, 2], "int32");
  const g = tf.grad((t: tf.Tensor) => tf.sum(embeddingLookup(t, ids)))(table);
  assert.deepEqual(g.arraySync(), [
    [1, 1],
    [0, 0],
    [2, 2],
  ]);
  tf.dispose([table, ids, g]);
  assert.equal(tf.memory().numTensors, before);
});

test("an all-padding sequence gives finite outputs and gradients", () => {
  const m = new TextClassifier(TINY_TEXT, 1);
  randomizeWeights(m, 2, 0.3);
  tf.tidy(() => {
    const ids = tf.tensor2d([[0, 0, 0, 0]], [1, 4], "int32");
    const mask = tf.zeros([1, 4]);
    const logits = m.forward(ids, { mask }).logits;
    assert.ok(logits.dataSync().every(Number.isFinite));
    const { value, grads } = tf.variableGrads(
      () => tf.sum(m.forward(ids, { mask, trace: false }).logits) as tf.Scalar,
      m.variables(),
    );
    assert.ok(Number.isFinite(value.dataSync()[0]));
    for (const g of Object.values(grads)) assert.ok(g.dataSync().every(Number.isFinite));
    const seq = m.embed(ids);
    const ge = tf.grad((s: tf.Tensor) => tf.sum(m.forwardFromEmbeddings(s, { mask }).logits))(seq);
    assert.ok(ge.dataSync().every(Number.isFinite));
  });
  m.dispose();
});

test("padding does not change a sequence's logits (the same text padded to two lengths)", () => {
  const m = new TextClassifier(TINY_TEXT, 3);
  randomizeWeights(m, 4, 0.4);
  tf.tidy(() => {
    const real = [CLS_ID, 17, 42, 9, 250];
    const run = (len: number) => {
      const row = [...real, ...new Array(len - real.length).fill(0)];
      const ids = tf.tensor2d([row], [1, len], "int32");
      const mask = tf.tensor2d([row.map((v) => (v === 0 ? 0 : 1))], [1, len]);
      return m.forward(ids, { mask }).logits.dataSync();
    };
    const short = run(5);
    assert.ok(relError(run(8), short) < 1e-5);
    assert.ok(relError(run(16), short) < 1e-5);
  });
  m.dispose();
});

test("bounds stay at or above the true value on a padded batch (tiny text model)", () => {
  const m = new TextClassifier(TINY_TEXT, 5);
  randomizeWeights(m, 6, 0.3);
  const ids = tf.tensor2d(
    [
      [CLS_ID, 5, 6, 7, 8, 9, 10, 11],
      [CLS_ID, 20, 21, 0, 0, 0, 0, 0],
      [CLS_ID, 0, 0, 0, 0, 0, 0, 0],
    ],
    [3, 8],
    "int32",
  );
  const mask = tf.tidy(() => tf.cast(tf.notEqual(ids, 0), "float32"));
  const { logits, trace } = m.forward(ids, { mask, trace: true });
  const bounds = networkBounds(m, trace!);
  const truth = networkLipschitz(m, ids, { mask });
  assert.equal(bounds.inputSpace, "embedding");
  bounds.examples.forEach((ex, e) => {
    assert.ok(truth[e] > 0);
    for (const v of HEAD_VARIANTS)
      assert.ok(
        ex.network[v] >= truth[e] * (1 - 1e-4),
        `example ${e} ${v}: ${ex.network[v]} < ${truth[e]}`,
      );
  });
  disposeTrace(trace);
  tf.dispose([logits, ids, mask]);
  m.dispose();
});

test("JaSMin ignores masked positions (padded = unpadded, whatever the padding holds)", () => {
  const m = new TextClassifier(TINY_TEXT, 7);
  randomizeWeights(m, 8, 0.5);
  const penalty = (row: number[], real: number) =>
    tf.tidy(() => {
      const ids = tf.tensor2d([row], [1, row.length], "int32");
      const mask = tf.tensor2d([row.map((_, i) => (i < real ? 1 : 0))], [1, row.length]);
      const { trace } = m.forward(ids, { mask, trace: true });
      try {
        return (["max-log", "max", "mean"] as const).map(
          (reduce) => jasminPenalty(trace!, { reduce }).dataSync()[0],
        );
      } finally {
        disposeTrace(trace);
      }
    });
  const base = penalty([CLS_ID, 3, 4, 5], 4);
  const padded = penalty([CLS_ID, 3, 4, 5, 0, 0, 0], 4);
  const junk = penalty([CLS_ID, 3, 4, 5, 99, 123, 7], 4); // masked positions holding real ids
  for (let i = 0; i < 3; i++) {
    assert.ok(
      Math.abs(base[i] - padded[i]) <= 1e-5 * Math.max(1, Math.abs(base[i])),
      `${base} vs ${padded}`,
    );
    assert.ok(
      Math.abs(base[i] - junk[i]) <= 1e-5 * Math.max(1, Math.abs(base[i])),
      `${base} vs ${junk}`,
    );
  }
  m.dispose();
});

test("train on a CSV file: masks, tokenizer.json and labels saved; resume continues", async () => {
  const dir = tempDir("attnlip-text-train-");
  const rows = ["message,category"];
  for (let i = 0; i < 60; i++)
    rows.push(
      i % 3 === 0
        ? `${wordPair(i)} win free money now offer,spam`
        : `${wordPair(i)} meeting notes for the project ${"and more ".repeat(i % 5)},ham`,
    );
  const csv = join(dir, "mail.csv");
  writeFileSync(csv, rows.join("\r\n") + "\r\n");
  const out = join(dir, "run");
  const before = tf.memory().numTensors;
  const r = await train({
    ...QUIET,
    data: `csv:${csv}`,
    textColumn: "message",
    labelColumn: "category",
    model: JSON.stringify(TINY_TEXT),
    epochs: 2,
    stopAfterEpoch: 1,
    batchSize: 8,
    lr: 3e-3,
    jasmin: { lambda: 0.01 },
    out,
  });
  assert.ok(r.finalTestAccuracy >= 0 && r.finalTestAccuracy <= 1);
  r.model.dispose();
  assert.equal(tf.memory().numTensors, before);
  assert.ok(existsSync(join(out, "tokenizer.json")));
  const state = JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
  assert.deepEqual(state.data.labels, ["ham", "spam"]);
  assert.equal(state.data.textColumn, "message");
  const ckpt = await loadCheckpoint(out);
  assert.ok(ckpt.tokenizer !== null && ckpt.tokenizer.size <= 300);
  ckpt.model.dispose();
  const resumed = await train({ ...QUIET, resume: out });
  assert.equal(resumed.trainState.epoch, 2);
  assert.ok(resumed.finalTestAccuracy >= 0.5, `accuracy ${resumed.finalTestAccuracy}`);
  resumed.model.dispose();
  await assert.rejects(
    train({
      ...QUIET,
      data: `csv:${csv}`,
      textColumn: "body",
      model: JSON.stringify(TINY_TEXT),
      epochs: 1,
    }),
    /mail\.csv: no column "body"/,
  );
});

test("a text model's progress and epoch lines count examples per second, not images", async () => {
  const dir = tempDir("attnlip-text-rate-");
  const rows = ["text,label"];
  for (let i = 0; i < 24; i++) rows.push(i % 2 === 0 ? `free money offer ${i},spam` : `project meeting notes ${i},ham`);
  const csv = join(dir, "mail.csv");
  writeFileSync(csv, rows.join("\n") + "\n");
  const lines: string[] = [];
  const r = await train({
    ...QUIET,
    progress: "lines",
    log: (line) => lines.push(line),
    data: `csv:${csv}`,
    model: JSON.stringify(TINY_TEXT),
    epochs: 1,
    batchSize: 8,
  });
  r.model.dispose();
  const epochLine = lines.find((l) => l.startsWith("epoch 1/1:"));
  assert.ok(epochLine !== undefined, lines.join("\n"));
  assert.match(epochLine, /\(\d+\.\d examples\/s\)/);
  assert.match(lines.find((l) => / step \d+\/\d+ /.test(l)) ?? "", / examples\/s ETA/);
  assert.ok(!lines.some((l) => l.includes("img/s")), lines.join("\n"));
});
