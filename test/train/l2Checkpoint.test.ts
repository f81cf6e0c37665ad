// An L2-attention ViT trains through `attnlip train`, saves and loads as a checkpoint, and
// `attnlip analyze` prints its block and network true values with no bound (src/lipschitz/
// layers/l2Attention.ts); a dot-product checkpoint written before the `attention` field loads.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/index.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { L2_NO_BOUND } from "../../src/lipschitz/layers/l2Attention.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

await useBackend("wasm");

const dir = mkdtempSync(join(tmpdir(), "attnlip-l2-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("attnlip train --model vit-micro-l2 saves a checkpoint that loads; analyze prints true values, kim, and none for the local variants", async () => {
  const ck = join(dir, "ck");
  const trained = await runAttnlipHere([
    "train",
    "--model",
    "vit-micro-l2",
    "--epochs",
    "1",
    "--limit",
    "64",
    "--test-limit",
    "16",
    "--out",
    ck,
    "--progress",
    "none",
  ]);
  assert.equal(trained.code, 0, trained.stderr);
  const config = JSON.parse(readFileSync(join(ck, "config.json"), "utf8"));
  assert.equal(config.attention, "l2");
  const loaded = await loadCheckpoint(ck);
  const names = [...loaded.model.getWeights().keys()];
  assert.ok(
    names.includes("blocks.0.attn.wq") &&
      !names.some((k) => k.endsWith(".wk") || k.endsWith(".bk") || k.endsWith(".bq")),
  );
  // Training moved the tied weight (its gradient reaches it) away from its initial values.
  const init = createModel(loaded.model.config, loaded.trainState.seed);
  const before = init.getWeights().get("blocks.0.attn.wq")!.data;
  const afterTraining = loaded.model.getWeights().get("blocks.0.attn.wq")!.data;
  assert.ok(
    before.some((v, i) => v !== afterTraining[i]),
    "wq trained",
  );
  const logits = tf.tidy(() =>
    Array.from(loaded.model.forward(tf.zeros([1, 28, 28, 1])).logits.dataSync()),
  );
  assert.ok(logits.every(Number.isFinite));
  init.dispose();
  loaded.model.dispose();

  const out = join(dir, "analysis");
  const r = await runAttnlipHere([
    "analyze",
    ck,
    "--n",
    "1",
    "--iterations",
    "300",
    "--variants",
    "paper,t3-exact,kim",
    "--out",
    out,
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(
    r.stdout,
    /│ paper\s+│ none\s+│ \d/,
    "block and network rows: no bound, a true value",
  );
  assert.match(r.stdout, /│ kim\s+│ [\d.e+]+\s+│ [\d.e+]+\s+│ [\d.e+]+/, "kim rows: a bound");
  assert.ok(r.stdout.includes(`Bound "none": ${L2_NO_BOUND}.`));
  const doc = JSON.parse(readFileSync(join(out, "analysis.json"), "utf8"));
  assert.deepEqual(doc.notes, [L2_NO_BOUND]);
  for (const layer of [doc.layers["block.0"], doc.layers.network]) {
    assert.ok(layer.true[0] > 0 && Number.isFinite(layer.true[0]), "a true value");
    assert.deepEqual(layer.paper, [null], "no bound (Infinity, written as null)");
    // Kim et al.'s bound of the attention, composed with the local rules: above the true value.
    assert.ok(layer.kim[0] >= layer.true[0], `kim ${layer.kim[0]} vs true ${layer.true[0]}`);
  }
  assert.ok(doc.layers["block.0"].heads[0].true[0] > 0, "head true value");
});

test("a dot-product checkpoint without the attention field still loads and runs", async () => {
  const loaded = await loadCheckpoint(join(import.meta.dirname, "../../models/vit-micro-mnist"));
  assert.equal(loaded.model.config.attention, undefined);
  assert.ok(loaded.model.getWeights().has("blocks.0.attn.wk"));
  const logits = tf.tidy(() =>
    Array.from(loaded.model.forward(tf.zeros([1, 28, 28, 1])).logits.dataSync()),
  );
  assert.ok(logits.every(Number.isFinite));
  loaded.model.dispose();
});
