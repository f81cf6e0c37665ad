import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { tf, useBackend } from "../../src/backend.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import {
  embeddedMnistDigest,
  loadEmbeddedMnist,
  mnistImageTensor,
  mnistLabelTensor,
  MNIST_PIXELS,
  takeExamples,
  type MnistSplit,
} from "../../src/data/mnist.ts";
import { sha256Parts } from "../helpers/sha256Parts.ts";

await useBackend("wasm");

const full = loadEmbeddedMnist();

function classCounts(s: MnistSplit): number[] {
  const out = new Array<number>(10).fill(0);
  for (const l of s.labels) out[l]++;
  return out;
}

function hashImage(s: MnistSplit, k: number): string {
  return Buffer.from(
    s.images.buffer,
    s.images.byteOffset + k * MNIST_PIXELS * 4,
    MNIST_PIXELS * 4,
  ).toString("base64");
}

test("default split: counts, shapes, labels, pixel range", () => {
  assert.equal(full.train.count, 8000);
  assert.equal(full.test.count, 2000);
  for (const s of [full.train, full.test]) {
    assert.equal(s.images.length, s.count * 784);
    assert.equal(s.labels.length, s.count);
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of s.images) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    assert.equal(lo, 0);
    assert.equal(hi, 1);
    for (const l of s.labels) assert.ok(l >= 0 && l <= 9);
  }
});

test("stratified: class shares within 1% of the full set's", () => {
  const tr = classCounts(full.train);
  const te = classCounts(full.test);
  const all = tr.map((v, c) => v + te[c]);
  assert.equal(
    all.reduce((a, b) => a + b, 0),
    10000,
  );
  for (let c = 0; c < 10; c++) {
    const share = all[c] / 10000;
    assert.ok(Math.abs(tr[c] / 8000 - share) < 0.01, `train class ${c}`);
    assert.ok(Math.abs(te[c] / 2000 - share) < 0.01, `test class ${c}`);
  }
  const small = loadEmbeddedMnist({ trainSize: 500, testSize: 300, seed: 3 });
  const str = classCounts(small.train);
  const ste = classCounts(small.test);
  for (let c = 0; c < 10; c++) {
    assert.ok(Math.abs(str[c] / 500 - all[c] / 10000) < 0.01);
    assert.ok(Math.abs(ste[c] / 300 - all[c] / 10000) < 0.01);
  }
});

test("deterministic per seed, different across seeds", () => {
  const a = loadEmbeddedMnist({ trainSize: 200, testSize: 100, seed: 7 });
  const b = loadEmbeddedMnist({ trainSize: 200, testSize: 100, seed: 7 });
  const c = loadEmbeddedMnist({ trainSize: 200, testSize: 100, seed: 8 });
  assert.deepEqual(a.train.labels, b.train.labels);
  assert.deepEqual(a.train.images, b.train.images);
  assert.deepEqual(a.test.images, b.test.images);
  assert.notDeepEqual(a.train.images, c.train.images);
});

test("train and test are disjoint (the package's 10,000 images are all distinct)", () => {
  const all = loadEmbeddedMnist({ trainSize: 9000, testSize: 1000, seed: 1 });
  const trainSet = new Set<string>();
  for (let k = 0; k < all.train.count; k++) trainSet.add(hashImage(all.train, k));
  assert.equal(trainSet.size, 9000, "no image twice in train");
  for (let k = 0; k < all.test.count; k++)
    assert.ok(!trainSet.has(hashImage(all.test, k)), `test image ${k} is also in train`);
});

test("bad sizes throw clear errors", () => {
  assert.throws(() => loadEmbeddedMnist({ trainSize: 9000, testSize: 1001 }), /exceeds the 10000/);
  assert.throws(() => loadEmbeddedMnist({ trainSize: 0 }), /trainSize must be a positive integer/);
  assert.throws(() => loadEmbeddedMnist({ testSize: -5 }), /testSize must be a positive integer/);
  assert.throws(() => loadEmbeddedMnist({ trainSize: 1.5 }), /positive integer/);
  assert.throws(() => takeExamples(full.test, 2001), /cannot take 2001/);
});

test("takeExamples and tensors", () => {
  const before = tf.memory().numTensors;
  const few = takeExamples(full.test, 16);
  assert.equal(few.count, 16);
  assert.deepEqual(few.labels, full.test.labels.slice(0, 16));
  const x = mnistImageTensor(few);
  const y = mnistLabelTensor(few);
  assert.deepEqual(x.shape, [16, 28, 28, 1]);
  assert.equal(x.dtype, "float32");
  assert.equal(y.dtype, "int32");
  assert.deepEqual(Array.from(x.dataSync().slice(0, 784)), Array.from(few.images.slice(0, 784)));
  tf.dispose([x, y]);
  assert.equal(tf.memory().numTensors, before);
});

// The embedded digits are known by a content digest (checkpoints record it: analyze and attack
// compare it with the data they load): each class's count and its pixels as float32 bytes.
test("embedded MNIST's content digest is the package's digits, class by class", async () => {
  const pkg = createRequire(import.meta.url)("mnist") as Record<number, { raw: number[]; length: number }>;
  const parts: (string | Uint8Array)[] = [];
  for (let c = 0; c < 10; c++) {
    const pixels = Float32Array.from(pkg[c].raw);
    parts.push(String(pkg[c].length), new Uint8Array(pixels.buffer));
  }
  assert.equal(embeddedMnistDigest(), sha256Parts(parts));
  // The same for every seed and limit: it is the data set's, not the split's.
  const a = await loadDataset("mnist", { seed: 1, limit: 10, testLimit: 10 });
  const b = await loadDataset("mnist", { seed: 7 });
  assert.equal(a.contentDigest, embeddedMnistDigest());
  assert.equal(b.contentDigest, embeddedMnistDigest());
});
