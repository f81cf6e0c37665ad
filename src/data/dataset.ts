import { InputError } from "../util/errors.ts";
import type { ImageSplit } from "./imageSplit.ts";
import { parseSpec, type ImageSource } from "./sources/index.ts";

/**
 * A common view of the image-classification data sets (embedded MNIST, IDX folders, CIFAR-10
 * binary batches), seeded shuffling and batching for training.
 */

export type { ImageSplit } from "./imageSplit.ts";

/** Training and test splits of one data set. */
export interface ImageDataset {
  /** The spec it was loaded from, normalised ("mnist", "idx:DIR", "cifar10:DIR"). */
  spec: string;
  /** Number of classes (from the source: 10 for MNIST and CIFAR-10; IDX: the largest label + 1). */
  classes: number;
  /** The valid pixel range [low, high] ([0, 1] for every built-in source). */
  range: readonly [number, number];
  /** The content digest of what the source read (data/identity.ts; recorded in checkpoints). */
  contentDigest: string;
  train: ImageSplit;
  test: ImageSplit;
}

/** Options of {@link loadDataset}. */
export interface LoadDatasetOptions {
  /** Seed of the embedded-MNIST train/test split (ignored for file data sets; default 0). */
  seed?: number;
  /** Keep at most this many training examples (the first ones in file / split order). */
  limit?: number;
  /** Keep at most this many test examples (default: all; embedded MNIST: 2000). */
  testLimit?: number;
}

/** Pixels per image of a split. */
export function imageSize(split: Pick<ImageSplit, "shape">): number {
  return split.shape[0] * split.shape[1] * split.shape[2];
}

/**
 * Checks an image data spec against the registered sources (data/registry.ts).
 *
 * @returns the normalised spec ("mnist", "idx:DIR", ...).
 * @throws InputError naming the spec and listing the accepted image forms.
 */
export function parseDataSpec(spec: string): string {
  return parseSpec(spec, "image").spec;
}

function checkLimit(name: string, value: number | undefined): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < 1))
    throw new InputError(`${name}: must be a positive integer, got ${value}`);
}

/**
 * The first `n` examples of a split (a copy when n < count, the split itself otherwise).
 *
 * @throws RangeError when n is not a non-negative integer.
 */
export function takeFirst(split: ImageSplit, n: number): ImageSplit {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`takeFirst: n must be an integer >= 0, got ${n}`);
  if (n >= split.count) return split;
  return selectExamples(split, Array.from({ length: n }, (_, i) => i));
}

/**
 * The examples of a split at the given positions, in that order (a copy).
 *
 * @param positions 0-based positions in the split.
 * @throws RangeError on a position out of range.
 * @example selectExamples(split, [0, 2]).count // 2
 */
export function selectExamples(split: ImageSplit, positions: readonly number[]): ImageSplit {
  const size = imageSize(split);
  const images = new Float32Array(positions.length * size);
  positions.forEach((p, i) => {
    if (!Number.isInteger(p) || p < 0 || p >= split.count)
      throw new RangeError(`selectExamples: position ${p} is outside 0..${split.count - 1}`);
    images.set(split.images.subarray(p * size, (p + 1) * size), i * size);
  });
  return {
    images,
    labels: Int32Array.from(positions, (p) => split.labels[p]),
    count: positions.length,
    shape: split.shape,
    indices: Int32Array.from(positions, (p) => split.indices[p]),
  };
}

/**
 * Loads an image data set through its registered source (data/sources/):
 *
 * - `mnist`: the 10,000 embedded digits, split by seed (loadEmbeddedMnist): trainSize =
 *   min(limit, 8000) (default 8000), testSize = min(testLimit, 2000) (default 2000); images
 *   [28, 28, 1].
 * - `idx:DIR`: MNIST-style IDX files in DIR (loadIdxDataset); images [h, w, 1].
 * - `cifar10:DIR`: CIFAR-10 binary batches in DIR (loadCifar10Dataset); images [32, 32, 3] HWC.
 *
 * For files, `limit` / `testLimit` keep the first examples of each split. The number of
 * classes and the pixel range come from the source.
 *
 * @throws InputError on a bad spec or limit, or (IdxError, Cifar10Error are InputErrors) on a
 *   missing or malformed file; RangeError from loadEmbeddedMnist on an invalid seed.
 * @example const d = await loadDataset("mnist", { seed: 0, limit: 512 }); // d.train.count === 512
 */
export async function loadDataset(spec: string, options: LoadDatasetOptions = {}): Promise<ImageDataset> {
  const parsed = parseSpec(spec, "image");
  checkLimit("limit", options.limit);
  checkLimit("test limit", options.testLimit);
  const source = parsed.source as ImageSource;
  const data = await source.load(parsed.arg, { seed: options.seed ?? 0, limit: options.limit, testLimit: options.testLimit });
  let { train, test } = data;
  if (options.limit !== undefined) train = takeFirst(train, options.limit);
  if (options.testLimit !== undefined) test = takeFirst(test, options.testLimit);
  return { spec: parsed.spec, classes: data.classes, range: data.range, contentDigest: data.contentDigest, train, test };
}

/**
 * A seeded generator with an inspectable 32-bit state (mulberry32, as src/nn/prng.ts), so a
 * training run can save where its shuffling stream is and resume it exactly.
 */
export class SeededRng {
  #state: number;

  /** @param seed any number; its low 32 bits start the stream. */
  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** The state (an unsigned 32-bit integer); a new SeededRng(state) continues the stream. */
  get state(): number {
    return this.#state;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
}

/**
 * A uniformly random permutation of 0..count-1 (Fisher-Yates with `rng`; advances it by
 * count - 1 draws).
 *
 * @returns Int32Array [count].
 */
export function shuffledOrder(count: number, rng: SeededRng): Int32Array {
  const order = new Int32Array(count);
  for (let i = 0; i < count; i++) order[i] = i;
  for (let i = count - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order;
}

/** One batch on the JS side: images [size * pixels] (HWC per image), labels [size]. */
export interface Batch {
  images: Float32Array;
  labels: Int32Array;
  size: number;
}

/**
 * Splits `order` into batches of `batchSize` examples of `split` (the last one smaller unless
 * `dropLast`), copying the examples in that order.
 *
 * @param order indices into the split (e.g. from {@link shuffledOrder}); null = 0..count-1.
 * @throws RangeError when batchSize is not a positive integer or an index is out of range.
 */
export function* batches(
  split: ImageSplit,
  order: Int32Array | null,
  batchSize: number,
  dropLast = false,
): Generator<Batch> {
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new RangeError(`batches: batchSize must be a positive integer, got ${batchSize}`);
  const pixels = imageSize(split);
  const count = order === null ? split.count : order.length;
  for (let start = 0; start < count; start += batchSize) {
    const size = Math.min(batchSize, count - start);
    if (dropLast && size < batchSize) return;
    const images = new Float32Array(size * pixels);
    const labels = new Int32Array(size);
    for (let k = 0; k < size; k++) {
      const idx = order === null ? start + k : order[start + k];
      if (idx < 0 || idx >= split.count)
        throw new RangeError(`batches: index ${idx} out of range [0, ${split.count})`);
      images.set(split.images.subarray(idx * pixels, (idx + 1) * pixels), k * pixels);
      labels[k] = split.labels[idx];
    }
    yield { images, labels, size };
  }
}

/** Number of batches {@link batches} yields. */
export function batchCount(count: number, batchSize: number, dropLast = false): number {
  return dropLast ? Math.floor(count / batchSize) : Math.ceil(count / batchSize);
}
