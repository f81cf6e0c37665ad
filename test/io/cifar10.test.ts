import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Cifar10Error,
  CIFAR10_RECORD_BYTES,
  decodeCifar10,
  loadCifar10Dataset,
} from "../../src/data/cifar10.ts";
import { InputError } from "../../src/util/errors.ts";
import { sha256Parts } from "../helpers/sha256Parts.ts";

/** One record: label, then R, G, B planes each filled with a value (R[0] optionally different). */
function record(label: number, r: number, g: number, b: number, r0 = r): Uint8Array {
  const out = new Uint8Array(CIFAR10_RECORD_BYTES);
  out[0] = label;
  out.fill(r, 1, 1025);
  out[1] = r0;
  out.fill(g, 1025, 2049);
  out.fill(b, 2049, 3073);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const px = (images: Float32Array, n: number, y: number, x: number) => [
  ...images.subarray(((n * 32 + y) * 32 + x) * 3, ((n * 32 + y) * 32 + x) * 3 + 3),
];

test("label 7, R = 10 except R[0] = 255, G = 20, B = 30: pixels are channel-last in [0, 1]", () => {
  const { images, labels, count, height, width, channels } = decodeCifar10(
    record(7, 10, 20, 30, 255),
    "data_batch_1.bin",
  );
  assert.equal(count, 1);
  assert.deepEqual([height, width, channels], [32, 32, 3]);
  assert.equal(images.length, 32 * 32 * 3);
  assert.deepEqual([...labels], [7]);
  assert.deepEqual(px(images, 0, 0, 0), [255 / 255, 20 / 255, 30 / 255].map(Math.fround));
  assert.deepEqual(px(images, 0, 0, 1), [10 / 255, 20 / 255, 30 / 255].map(Math.fround));
  assert.deepEqual(px(images, 0, 31, 31), [10 / 255, 20 / 255, 30 / 255].map(Math.fround));
});

test("row-major planes map to (y, x): plane byte 32*y + x is pixel (y, x)", () => {
  const rec = record(0, 0, 0, 0);
  rec[1 + 1024 + 32 * 5 + 7] = 255; // G at y = 5, x = 7
  const { images } = decodeCifar10(concat([record(1, 1, 1, 1), rec]), "b");
  assert.deepEqual(px(images, 1, 5, 7), [0, 1, 0]);
  assert.deepEqual(px(images, 1, 7, 5), [0, 0, 0]);
  assert.deepEqual(px(images, 0, 5, 7), [1 / 255, 1 / 255, 1 / 255].map(Math.fround));
});

test("a length that is not a multiple of 3073 is an error naming the file", () => {
  const bytes = concat([record(1, 0, 0, 0), record(2, 0, 0, 0)]).subarray(0, 2 * 3073 - 5);
  assert.throws(
    () => decodeCifar10(bytes, "data_batch_3.bin"),
    (e: unknown) =>
      e instanceof Cifar10Error &&
      e instanceof InputError &&
      /^data_batch_3\.bin: 6141 bytes is not a multiple of the 3073-byte record \(1 record and 3068 extra bytes/.test(
        e.message,
      ),
  );
  assert.throws(() => decodeCifar10(new Uint8Array(0), "x"), /x: empty file/);
});

test("a label above 9 is an error naming the record", () => {
  const bytes = concat([record(9, 0, 0, 0), record(10, 0, 0, 0)]);
  assert.throws(
    () => decodeCifar10(bytes, "test_batch.bin"),
    /^Cifar10Error: test_batch\.bin: record 1 \(byte 3073\) has label 10, expected 0\.\.9$/,
  );
});

test("loadCifar10Dataset reads data_batch_1..5 in order and test_batch, in dir or dir/cifar-10-batches-bin", async () => {
  const root = await mkdtemp(join(tmpdir(), "attnlip-cifar-"));
  try {
    await assert.rejects(
      loadCifar10Dataset(root),
      (e: Error) => e instanceof Cifar10Error && /lacks data_batch_1\.bin/.test(e.message),
    );
    for (const folder of [root, join(root, "sub", "cifar-10-batches-bin")]) {
      await mkdir(folder, { recursive: true });
      for (let i = 1; i <= 5; i++)
        await writeFile(
          join(folder, `data_batch_${i}.bin`),
          concat([record(i, 10 * i, 0, 0), record(i - 1, 0, 0, 0)]),
        );
      await writeFile(join(folder, "test_batch.bin"), record(8, 0, 0, 255));
      const { train, test: testSplit } = await loadCifar10Dataset(
        folder === root ? root : join(root, "sub"),
      );
      assert.equal(train.count, 10);
      assert.equal(train.images.length, 10 * 3072);
      assert.deepEqual([...train.labels], [1, 0, 2, 1, 3, 2, 4, 3, 5, 4]);
      assert.deepEqual(px(train.images, 8, 3, 3), [Math.fround(50 / 255), 0, 0]);
      assert.equal(testSplit.count, 1);
      assert.deepEqual([...testSplit.labels], [8]);
      assert.deepEqual(px(testSplit.images, 0, 0, 0), [0, 0, 1]);
    }
    await writeFile(join(root, "data_batch_4.bin"), new Uint8Array(100));
    await assert.rejects(
      loadCifar10Dataset(root),
      (e: Error) =>
        e instanceof Cifar10Error && e.message.startsWith(join(root, "data_batch_4.bin")),
    );
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

// A CIFAR-10 folder is known by the content digest of the six batch files it reads, in order
// (the held-out guard decides "the checkpoint's own data" by it, not by the path's spelling).
test("loadCifar10Dataset's content digest covers the six batch files in order, wherever they are", async () => {
  const root = await mkdtemp(join(tmpdir(), "attnlip-cifar-"));
  try {
    const names = [1, 2, 3, 4, 5].map((i) => `data_batch_${i}.bin`).concat("test_batch.bin");
    const sub = join(root, "sub", "cifar-10-batches-bin");
    await mkdir(sub, { recursive: true });
    for (const folder of [root, sub])
      for (const [i, n] of names.entries()) await writeFile(join(folder, n), record(i, i, 0, 0));
    const bytes = await Promise.all(names.map((n) => readFile(join(root, n))));
    const a = await loadCifar10Dataset(root);
    assert.equal(a.contentDigest, sha256Parts(bytes));
    assert.equal((await loadCifar10Dataset(join(root, "sub"))).contentDigest, a.contentDigest);
    // One pixel of the test batch changes: another digest.
    await writeFile(join(root, "test_batch.bin"), record(5, 5, 0, 0, 6));
    assert.notEqual((await loadCifar10Dataset(root)).contentDigest, a.contentDigest);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
