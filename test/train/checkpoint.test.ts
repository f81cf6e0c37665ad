import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import type { ImageDataset } from "../../src/data/dataset.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { InputError } from "../../src/util/errors.ts";
import { CheckpointError, loadCheckpoint } from "../../src/train/checkpoint.ts";
import { train, TrainingDiverged, type TrainOptions } from "../../src/train/trainer.ts";
import { digits, QUIET, tempDir, TINY } from "./helpers.ts";

await useBackend("wasm");

function assertSameWeights(a: Map<string, NamedArray>, b: Map<string, NamedArray>): void {
  assert.deepEqual([...a.keys()], [...b.keys()]);
  for (const [name, w] of a) {
    const other = b.get(name)!;
    assert.deepEqual(w.shape, other.shape);
    // Bit-exact: compare the raw bytes.
    assert.ok(
      Buffer.from(w.data.buffer, w.data.byteOffset, w.data.byteLength).equals(
        Buffer.from(other.data.buffer, other.data.byteOffset, other.data.byteLength),
      ),
      `parameter ${name} differs`,
    );
  }
}

function poisoned(dataset: ImageDataset): ImageDataset {
  return { ...dataset, train: { ...dataset.train, images: new Float32Array(dataset.train.images.length).fill(NaN) } };
}

const base = (dataset: ImageDataset): TrainOptions => ({
  ...QUIET,
  dataset,
  model: TINY,
  epochs: 2,
  batchSize: 32,
  lr: 3e-3,
  seed: 5,
  jasmin: { lambda: 0.1 },
});

test("checkpoint round trip is bit-exact; resume equals an uninterrupted run; a NaN loss stops and keeps the last checkpoint", async () => {
  const dataset = await digits(256, 64);
  // Uninterrupted: 2 epochs.
  const straightDir = tempDir();
  const straight = await train({ ...base(dataset), out: straightDir });
  const straightWeights = straight.model.getWeights();
  straight.model.dispose();

  // Round trip: the saved checkpoint loads with the same weights, config and state.
  const loaded = await loadCheckpoint(straightDir);
  assertSameWeights(loaded.model.getWeights(), straightWeights);
  assert.equal(loaded.trainState.epoch, 2);
  assert.equal(loaded.trainState.step, 16);
  assert.equal(loaded.config.dModel, 16);
  loaded.model.dispose();

  // Interrupted after epoch 1.
  const dir = tempDir();
  const first = await train({ ...base(dataset), out: dir, stopAfterEpoch: 1 });
  first.model.dispose();
  assert.equal((await loadCheckpoint(dir)).trainState.epoch, 1);

  // A poisoned resume diverges at its first step, with a clear message; epoch 1 stays intact.
  await assert.rejects(
    train({ ...QUIET, resume: dir, dataset: poisoned(dataset) }),
    (e: unknown) => {
      assert.ok(e instanceof TrainingDiverged && e instanceof InputError);
      assert.match(e.message, /training diverged at epoch 2, step 9: the loss is NaN/);
      assert.match(e.message, /checkpoint of epoch 1 .* is intact/);
      assert.ok(!e.message.includes("\n"));
      return true;
    },
  );
  const kept = await loadCheckpoint(dir);
  assert.equal(kept.trainState.epoch, 1);
  for (const w of kept.model.getWeights().values()) assert.ok(w.data.every(Number.isFinite));
  kept.model.dispose();

  // Resuming for the second epoch reaches the uninterrupted run's weights, bit for bit.
  const resumed = await train({ ...QUIET, resume: dir, dataset });
  assert.equal(resumed.trainState.step, 16);
  assertSameWeights(resumed.model.getWeights(), straightWeights);
  resumed.model.dispose();

  // metrics.jsonl of the resumed run matches the uninterrupted one record for record (times aside).
  const records = (d: string) =>
    readFileSync(join(d, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => {
        const { time: _time, ...rest } = JSON.parse(l);
        return rest;
      });
  assert.deepEqual(records(dir), records(straightDir));
});

test("lr 1e30 diverges with TrainingDiverged before any checkpoint", async () => {
  const dataset = await digits(256, 64);
  const dir = tempDir();
  const before = tf.memory().numTensors;
  await assert.rejects(
    train({ ...base(dataset), lr: 1e30, warmupSteps: 0, clip: 0, out: dir }),
    (e: unknown) => e instanceof TrainingDiverged && /diverged/.test(e.message),
  );
  assert.equal(tf.memory().numTensors, before);
  // The diverged run's log is kept, not replaced, when the next run uses the same folder.
  const log = readFileSync(join(dir, "metrics.jsonl"), "utf8");
  assert.ok(log.length > 0);
  const warnings: string[] = [];
  const again = await train({ ...base(dataset), epochs: 1, out: dir, warn: (l) => warnings.push(l) });
  again.model.dispose();
  assert.equal(readFileSync(join(dir, "metrics.1.jsonl"), "utf8"), log);
  assert.match(warnings.join("\n"), /held an earlier run's metrics\.jsonl without a checkpoint .*kept as metrics\.1\.jsonl/);
});

test("loadCheckpoint: broken or truncated checkpoints raise a one-line CheckpointError (an InputError)", async () => {
  const dataset = await digits(256, 64);
  const good = tempDir();
  const r = await train({ ...base(dataset), epochs: 1, out: good });
  r.model.dispose();
  const files = ["config.json", "model.safetensors", "optimizer.safetensors", "train_state.json", "metrics.jsonl"];
  const copy = () => {
    const d = tempDir();
    for (const f of files) copyFileSync(join(good, f), join(d, f));
    return d;
  };
  const expectBroken = async (dir: string, pattern: RegExp) => {
    await assert.rejects(loadCheckpoint(dir), (e: unknown) => {
      assert.ok(e instanceof CheckpointError && e instanceof InputError, String(e));
      assert.match(e.message, pattern);
      assert.ok(!e.message.includes("\n"), e.message);
      return true;
    });
  };
  await expectBroken(join(good, "nope"), /no such folder/);

  let d = copy();
  rmSync(join(d, "optimizer.safetensors"));
  await expectBroken(d, /missing optimizer\.safetensors/);

  d = copy();
  writeFileSync(join(d, "config.json"), readFileSync(join(good, "config.json"), "utf8").slice(0, 40));
  await expectBroken(d, /config\.json is not valid JSON/);

  d = copy();
  writeFileSync(join(d, "train_state.json"), JSON.stringify({ format: "attnlip-train-state" }));
  await expectBroken(d, /train_state\.json: /);

  d = copy();
  truncateSync(join(d, "model.safetensors"), 1000);
  await expectBroken(d, /model\.safetensors/);

  d = copy();
  const config = JSON.parse(readFileSync(join(good, "config.json"), "utf8"));
  writeFileSync(join(d, "config.json"), JSON.stringify({ ...config, dModel: 32 }));
  await expectBroken(d, /model\.safetensors: tensors do not match the expected ones/);

  d = copy();
  writeFileSync(join(d, "config.json"), JSON.stringify({ ...config, heads: 3 }));
  await expectBroken(d, /config\.json: model config: dModel: must be divisible by heads/);

  // Files from different steps are refused rather than mixed.
  d = copy();
  const state = JSON.parse(readFileSync(join(good, "train_state.json"), "utf8"));
  writeFileSync(join(d, "train_state.json"), JSON.stringify({ ...state, step: 99 }));
  await expectBroken(d, /model\.safetensors is from step 8 but train_state\.json from step 99/);

  // A fresh run refuses to overwrite a checkpoint folder.
  await assert.rejects(train({ ...base(dataset), out: good }), /already holds a checkpoint/);
});

test("an interrupted checkpoint write: stray temporary files are ignored, a committed journal is rolled forward", async () => {
  const dataset = await digits(256, 64);
  const one = tempDir();
  const r1 = await train({ ...base(dataset), out: one, stopAfterEpoch: 1 });
  r1.model.dispose();
  const two = tempDir();
  const r2 = await train({ ...base(dataset), out: two });
  const twoWeights = r2.model.getWeights();
  r2.model.dispose();
  const names = ["config.json", "model.safetensors", "optimizer.safetensors", "train_state.json"];

  // Crash before the journal: the epoch-2 files exist only under temporary names.
  for (const f of names) copyFileSync(join(two, f), join(one, f + ".tmp"));
  let c = await loadCheckpoint(one);
  assert.equal(c.trainState.epoch, 1);
  c.model.dispose();

  // Crash after the journal, with two of four renames done: loading completes the commit.
  copyFileSync(join(two, "config.json"), join(one, "config.json"));
  copyFileSync(join(two, "model.safetensors"), join(one, "model.safetensors"));
  rmSync(join(one, "config.json.tmp"));
  rmSync(join(one, "model.safetensors.tmp"));
  writeFileSync(join(one, "checkpoint.commit.json"), JSON.stringify({ files: names }));
  c = await loadCheckpoint(one);
  assert.equal(c.trainState.epoch, 2);
  assertSameWeights(c.model.getWeights(), twoWeights);
  c.model.dispose();
});

test("the library's train() refuses min-lr above lr and a JaSMin lambda above its bound, as the CLI does", async () => {
  await assert.rejects(train({ data: "mnist", model: "vit-micro", limit: 32, lr: 1e-3, minLr: 1e-2, ...QUIET }), {
    name: "InputError",
    message: /^min-lr: 0\.01 is above lr 0\.001/,
  });
  await assert.rejects(train({ data: "mnist", model: "vit-micro", limit: 32, jasmin: { lambda: 1e300 }, ...QUIET }), {
    name: "InputError",
    message: /^jasmin: lambda must be at most 1000000, got 1e\+300/,
  });
});

test("training on a data set with no training examples is refused, not a run that did nothing", async () => {
  const empty = { spec: "empty", classes: 10, range: [0, 1] as const, contentDigest: "sha256:0", train: { images: new Float32Array(0), labels: new Int32Array(0), count: 0, shape: [28, 28, 1] as [number, number, number], indices: new Int32Array(0) }, test: { images: new Float32Array(0), labels: new Int32Array(0), count: 0, shape: [28, 28, 1] as [number, number, number], indices: new Int32Array(0) } };
  await assert.rejects(train({ dataset: empty, model: "vit-micro", epochs: 1, ...QUIET }), {
    name: "InputError",
    message: "data: empty has no training examples; nothing to train on",
  });
});

test("a fresh run refuses a folder holding part of a checkpoint, saying it is not one --resume continues", async () => {
  const dataset = await digits(64, 16);
  const dir = tempDir();
  writeFileSync(join(dir, "model.safetensors"), Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9]));
  await assert.rejects(
    train({ ...base(dataset), out: dir }),
    (e: Error) =>
      e instanceof InputError &&
      /already holds model\.safetensors but no readable train_state\.json, so not a checkpoint --resume can continue/.test(
        e.message,
      ),
  );
  assert.deepEqual(
    [...readFileSync(join(dir, "model.safetensors"))],
    [1, 2, 3, 4, 5, 6, 7, 8, 9],
    "the file was changed",
  );
});
