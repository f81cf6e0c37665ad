import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { decodeIdx, IdxError, loadIdxDataset, readIdx } from "../../src/data/idx.ts";
import { InputError } from "../../src/util/errors.ts";
import { sha256Parts } from "../helpers/sha256Parts.ts";

/** An IDX file: magic 00 00, type byte, dims (big-endian uint32), then the given data bytes. */
function idx(type: number, dims: number[], data: ArrayLike<number> = []): Uint8Array {
  const out = new Uint8Array(4 + 4 * dims.length + data.length);
  const view = new DataView(out.buffer);
  out[2] = type;
  out[3] = dims.length;
  dims.forEach((d, i) => view.setUint32(4 + 4 * i, d, false));
  out.set(data, 4 + 4 * dims.length);
  return out;
}

function rejects(bytes: Uint8Array, pattern: RegExp, name = "train-images-idx3-ubyte"): void {
  assert.throws(
    () => decodeIdx(bytes, name),
    (e: unknown) => {
      assert.ok(e instanceof IdxError, `expected IdxError, got ${String(e)}`);
      assert.ok(e instanceof InputError);
      assert.ok(e.message.startsWith(`${name}: `), e.message);
      assert.match(e.message, pattern);
      return true;
    },
  );
}

test("the MNIST header 00 00 08 03 | 60000 | 28 | 28 is read big-endian", () => {
  const bytes = idx(0x08, [60000, 28, 28], [1, 2, 3]);
  assert.deepEqual([...bytes.subarray(0, 8)], [0, 0, 8, 3, 0x00, 0x00, 0xea, 0x60]);
  // Misread little-endian, the magic 00 00 08 03 would be a count of 50,855,936 images and
  // 60000 would be 1,625,948,160; the error must name 60000 x 28 x 28 = 47,040,000 bytes.
  rejects(
    bytes,
    /\[60000, 28, 28\] of u8 \(1 byte each\) need 47040000 data bytes, but the file has 3$/,
  );
});

test("2 images of 2x2 with only 5 pixel bytes: expected 8, actual 5", () => {
  rejects(idx(0x08, [2, 2, 2], [1, 2, 3, 4, 5]), /need 8 data bytes, but the file has 5/);
  rejects(
    idx(0x08, [2, 2, 2], [1, 2, 3, 4, 5, 6, 7, 8, 9]),
    /need 8 data bytes, but the file has 9/,
  );
});

test("a well-formed u8 file decodes to its shape and data", () => {
  const t = decodeIdx(idx(0x08, [2, 2, 2], [0, 1, 2, 3, 252, 253, 254, 255]), "x");
  assert.equal(t.dtype, "u8");
  assert.deepEqual(t.shape, [2, 2, 2]);
  assert.ok(t.data instanceof Uint8Array);
  assert.deepEqual([...t.data], [0, 1, 2, 3, 252, 253, 254, 255]);
});

test("a gzip-compressed file is read transparently", async () => {
  const plain = idx(0x08, [3], [7, 8, 9]);
  const t = decodeIdx(gzipSync(plain), "labels.gz");
  assert.deepEqual(t.shape, [3]);
  assert.deepEqual([...t.data], [7, 8, 9]);
  // Errors inside the compressed file still name it; corrupt gzip is an IdxError.
  rejects(gzipSync(idx(0x08, [4], [1])), /need 4 data bytes, but the file has 1/, "labels.gz");
  rejects(Uint8Array.from([0x1f, 0x8b, 8, 0, 1, 2, 3]), /gzip decompression failed/, "labels.gz");
  const dir = await mkdtemp(join(tmpdir(), "attnlip-idx-"));
  try {
    const path = join(dir, "x.gz");
    await writeFile(path, gzipSync(plain));
    assert.deepEqual([...(await readIdx(path)).data], [7, 8, 9]);
    await writeFile(path, Uint8Array.from([1, 0, 8, 0]));
    await assert.rejects(
      readIdx(path),
      (e: Error) => e instanceof IdxError && e.message.startsWith(`${path}: bad magic`),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("bad magic (first two bytes not 0) is rejected", () => {
  rejects(
    Uint8Array.from([0x08, 0x00, 0x08, 0x01, 0, 0, 0, 0]),
    /bad magic: first two bytes are 08 00, expected 00 00/,
  );
  rejects(Uint8Array.from([0x00, 0x01, 0x08, 0x01, 0, 0, 0, 0]), /bad magic/);
});

test("an unknown type byte is rejected", () => {
  rejects(idx(0x0a, [0]), /unknown element type byte 0A/);
  rejects(idx(0x00, [0]), /unknown element type byte 00/);
});

test("a truncated header is rejected", () => {
  rejects(new Uint8Array(0), /truncated header: 0 bytes/);
  rejects(Uint8Array.from([0, 0, 8]), /truncated header: 3 bytes/);
  rejects(
    idx(0x08, [60000, 28, 28]).subarray(0, 13),
    /truncated header: 3 dimensions need 16 header bytes but the file has 13/,
  );
});

test("zero dimensions are fine: a size-0 dimension and a rank-0 file", () => {
  const empty = decodeIdx(idx(0x08, [0, 28, 28]), "empty");
  assert.deepEqual(empty.shape, [0, 28, 28]);
  assert.equal(empty.data.length, 0);
  const scalar = decodeIdx(idx(0x08, [], [42]), "scalar");
  assert.deepEqual(scalar.shape, []);
  assert.deepEqual([...scalar.data], [42]);
  rejects(idx(0x08, []), /need 1 data byte, but the file has 0/);
});

test("huge dimensions are compared exactly, without allocating", () => {
  rejects(
    idx(0x0e, [0xffffffff, 0xffffffff, 0xffffffff], [1, 2]),
    new RegExp(`need ${0xffffffffn ** 3n * 8n} data bytes, but the file has 2`),
  );
});

test("signed and floating types are read big-endian", () => {
  const i8 = decodeIdx(idx(0x09, [2], [0xff, 0x7f]), "i8");
  assert.deepEqual([i8.dtype, ...i8.data], ["i8", -1, 127]);
  const i16 = decodeIdx(idx(0x0b, [2], [0xff, 0xfe, 0x01, 0x02]), "i16");
  assert.deepEqual([i16.dtype, ...i16.data], ["i16", -2, 258]);
  const i32 = decodeIdx(idx(0x0c, [1], [0x80, 0, 0, 1]), "i32");
  assert.deepEqual([i32.dtype, ...i32.data], ["i32", -2147483647]);
  const f32 = decodeIdx(idx(0x0d, [1], [0x3f, 0xc0, 0, 0]), "f32");
  assert.deepEqual([f32.dtype, ...f32.data], ["f32", 1.5]);
  const f64 = decodeIdx(idx(0x0e, [1], [0xc0, 0x04, 0, 0, 0, 0, 0, 0]), "f64");
  assert.deepEqual([f64.dtype, ...f64.data], ["f64", -2.5]);
  rejects(
    idx(0x0d, [2], [0x3f, 0xc0, 0, 0, 0]),
    /\[2\] of f32 \(4 bytes each\) need 8 data bytes, but the file has 5/,
  );
});

async function writeDataset(
  dir: string,
  options: { gzip?: boolean; labels?: number[]; testLabelCount?: number } = {},
) {
  const gz = options.gzip ? ".gz" : "";
  const enc = (b: Uint8Array) => (options.gzip ? gzipSync(b) : b);
  const trainPixels = [0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8]; // 3 images of 2x2
  await writeFile(
    join(dir, `train-images-idx3-ubyte${gz}`),
    enc(idx(0x08, [3, 2, 2], trainPixels)),
  );
  await writeFile(
    join(dir, `train-labels-idx1-ubyte${gz}`),
    enc(idx(0x08, [3], options.labels ?? [5, 0, 9])),
  );
  await writeFile(
    join(dir, `t10k-images-idx3-ubyte${gz}`),
    enc(idx(0x08, [1, 2, 2], [9, 9, 9, 9])),
  );
  const n = options.testLabelCount ?? 1;
  await writeFile(
    join(dir, `t10k-labels-idx1-ubyte${gz}`),
    enc(idx(0x08, [n], new Array(n).fill(3))),
  );
}

test("loadIdxDataset reads the four files (plain or .gz) and scales pixels to [0, 1]", async () => {
  for (const gzip of [false, true]) {
    const dir = await mkdtemp(join(tmpdir(), "attnlip-idx-"));
    try {
      await writeDataset(dir, { gzip });
      const { train, test: testSplit } = await loadIdxDataset(dir);
      assert.equal(train.count, 3);
      assert.equal(train.height, 2);
      assert.equal(train.width, 2);
      assert.ok(train.images instanceof Float32Array);
      assert.deepEqual([...train.images.subarray(0, 4)], [0, 1, 0.2, 0.4].map(Math.fround));
      assert.ok(train.labels instanceof Int32Array);
      assert.deepEqual([...train.labels], [5, 0, 9]);
      assert.equal(testSplit.count, 1);
      assert.deepEqual([...testSplit.labels], [3]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
});

test("loadIdxDataset checks counts, label range and missing files", async () => {
  const dir = await mkdtemp(join(tmpdir(), "attnlip-idx-"));
  try {
    await assert.rejects(
      loadIdxDataset(dir),
      /no train images file found \(looked for train-images-idx3-ubyte, /,
    );
    await writeDataset(dir, { labels: [1, 10, 2] });
    await assert.rejects(
      loadIdxDataset(dir),
      /train-labels-idx1-ubyte: label 1 is 10, expected 0\.\.9/,
    );
    await writeDataset(dir, { testLabelCount: 2 });
    await assert.rejects(
      loadIdxDataset(dir),
      /t10k-labels-idx1-ubyte: 2 labels but .*t10k-images-idx3-ubyte has 1 images/,
    );
    await writeDataset(dir);
    await writeFile(join(dir, "train-labels-idx1-ubyte"), idx(0x08, [3, 1], [1, 2, 3]));
    await assert.rejects(
      loadIdxDataset(dir),
      (e: Error) =>
        e instanceof IdxError && /expected unsigned bytes of shape \[count\]/.test(e.message),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

// Issue: the held-out guard compared data specs as strings. A data set is now known by the
// content digest of every file its source read: for an IDX folder, the four files.
test("loadIdxDataset's content digest covers the bytes of all four files, wherever the folder is", async () => {
  const dir = await mkdtemp(join(tmpdir(), "attnlip-idx-"));
  const copy = await mkdtemp(join(tmpdir(), "attnlip-idx-copy-"));
  try {
    await writeDataset(dir);
    await writeDataset(copy);
    const names = [
      "train-images-idx3-ubyte",
      "train-labels-idx1-ubyte",
      "t10k-images-idx3-ubyte",
      "t10k-labels-idx1-ubyte",
    ];
    const files = await Promise.all(names.map((n) => readFile(join(dir, n))));
    const a = await loadIdxDataset(dir);
    assert.equal(a.contentDigest, sha256Parts(files));
    assert.equal((await loadIdxDataset(copy)).contentDigest, a.contentDigest);
    // Only the test labels change (3 -> 4): another digest.
    await writeFile(join(dir, "t10k-labels-idx1-ubyte"), idx(0x08, [1], [4]));
    const b = await loadIdxDataset(dir);
    assert.notEqual(b.contentDigest, a.contentDigest);
    assert.equal(
      b.contentDigest,
      sha256Parts([...files.slice(0, 3), await readFile(join(dir, "t10k-labels-idx1-ubyte"))]),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
    await rm(copy, { recursive: true, force: true });
  }
});
