import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { analyze } from "../../src/analysis/analyze.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";

// Cases a newcomer found by hand: each must end with exit 2 and one line, or a clear message.
await useBackend("wasm");

const fresh = () => mkdtempSync(join(tmpdir(), "attnlip-edge-"));

test("a run whose test loss overflows stops with exit 2 and saves nothing for that epoch", async () => {
  const out = join(fresh(), "run");
  const r = await runAttnlipHere([
    "train",
    "--data",
    "mnist",
    "--limit",
    "32",
    "--test-limit",
    "32",
    "--epochs",
    "1",
    "--lr",
    "1e9",
    "--out",
    out,
    "--progress",
    "none",
  ]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(
    r.stderr.trim(),
    /^attnlip: training diverged in epoch 1: the test cross-entropy is (NaN|Infinity)/,
  );
});

test("resuming a finished run says there is nothing to do, with no NaN", async () => {
  const out = join(fresh(), "run");
  const first = runAttnlip([
    "train",
    "--data",
    "mnist",
    "--limit",
    "32",
    "--test-limit",
    "32",
    "--epochs",
    "2",
    "--out",
    out,
    "--progress",
    "none",
  ]);
  assert.equal(first.code, 0, first.stderr);
  const again = await runAttnlipHere(["train", "--resume", out]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /already trained to epoch 2 of 2: nothing to do/);
  assert.doesNotMatch(again.stdout, /NaN/);
  const fewer = await runAttnlipHere(["train", "--resume", out, "--epochs", "1"]);
  assert.equal(fewer.code, 0, fewer.stderr);
  assert.match(
    fewer.stdout,
    /^already trained to epoch 2 \(--epochs 1 asks for fewer; a run is never shortened\): nothing to do/,
  );
  // The folder that holds the run (as runs/demo holds baseline/ and jasmin/) names it.
  const parent = await runAttnlipHere(["analyze", dirname(out), "--n", "1"]);
  assert.equal(parent.code, 2);
  assert.match(
    parent.stderr,
    /^attnlip: checkpoint .*: not a checkpoint itself, but it holds one: run\/; give one of them, e\.g\. .*\/run\n$/,
  );
});

test("--out naming a plain file is bad input (exit 2)", async () => {
  const file = join(fresh(), "plain");
  writeFileSync(file, "x");
  const r = await runAttnlipHere([
    "train",
    "--data",
    "mnist",
    "--limit",
    "32",
    "--epochs",
    "1",
    "--out",
    file,
    "--progress",
    "none",
  ]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1);
});

test("an IDX test split with no images is bad input for analyze and attack", async () => {
  const dir = fresh();
  const idx = (type: number, dims: number[], data: number[] = []) => {
    const header = Buffer.alloc(4 + 4 * dims.length);
    header.writeUInt8(type, 2);
    header.writeUInt8(dims.length, 3);
    dims.forEach((d, i) => header.writeUInt32BE(d, 4 + 4 * i));
    return Buffer.concat([header, Buffer.from(data)]);
  };
  writeFileSync(join(dir, "train-images-idx3-ubyte"), idx(8, [1, 28, 28], new Array(784).fill(0)));
  writeFileSync(join(dir, "train-labels-idx1-ubyte"), idx(8, [1], [3]));
  writeFileSync(join(dir, "t10k-images-idx3-ubyte"), idx(8, [0, 28, 28]));
  writeFileSync(join(dir, "t10k-labels-idx1-ubyte"), idx(8, [0]));
  for (const args of [
    ["analyze", "--random-init", "--n", "2", "--data", `idx:${dir}`],
    [
      "attack",
      "--model",
      "vit-tiny",
      "--random-init",
      "--n",
      "2",
      "--eps",
      "0.1",
      "--data",
      `idx:${dir}`,
    ],
  ]) {
    const r = await runAttnlipHere(args);
    assert.equal(r.code, 2, `${args[0]}: ${r.stderr}`);
    assert.match(r.stderr.trim(), /holds no examples/);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
});

test("analyze refuses a model whose logits are not finite", () => {
  const model = createModel(
    {
      kind: "vit",
      imageSize: 28,
      channels: 1,
      patchSize: 7,
      dModel: 8,
      heads: 2,
      blocks: 1,
      mlpHidden: 16,
      classes: 10,
    },
    0,
  ) as TransformerClassifier;
  const w = model.getWeights().get("head.w")!;
  model.setWeights(
    { "head.w": { data: new Float32Array(w.data.length).fill(NaN), shape: w.shape } },
    { partial: true },
  );
  const x = tf.zeros([1, 28, 28, 1]);
  const before = tf.memory().numTensors;
  assert.throws(() => analyze(model, x), /logits are not finite/);
  assert.equal(tf.memory().numTensors, before);
  tf.dispose(x);
  model.dispose();
});
