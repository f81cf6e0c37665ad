import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { InputError } from "../util/errors.ts";
import { counted } from "../util/format.ts";
import { ContentHasher } from "./identity.ts";

/**
 * Reader of the CIFAR-10 binary version (A. Krizhevsky, https://www.cs.toronto.edu/~kriz/cifar.html,
 * "Binary version"): a batch file is a sequence of 3073-byte records, each
 *
 *   1 byte      the label, 0..9
 *   1024 bytes  red channel, 32x32 row-major
 *   1024 bytes  green channel
 *   1024 bytes  blue channel
 *
 * i.e. channel-planar (CHW). The decoded images are channel-LAST (HWC), see {@link decodeCifar10}.
 */

/** A problem with a CIFAR-10 file; the message names the file and the problem. */
export class Cifar10Error extends InputError {
  override name = "Cifar10Error";
}

/** Image height and width in pixels. */
export const CIFAR10_SIZE = 32;
/** Bytes per record: 1 label byte + 3 * 32 * 32 pixel bytes. */
export const CIFAR10_RECORD_BYTES = 1 + 3 * 32 * 32;
/** Class names by label (batches.meta.txt of the binary distribution). */
export const CIFAR10_CLASSES = [
  "airplane",
  "automobile",
  "bird",
  "cat",
  "deer",
  "dog",
  "frog",
  "horse",
  "ship",
  "truck",
] as const;

/** Decoded CIFAR-10 images and labels. */
export interface Cifar10Split {
  /**
   * Pixels scaled to [0, 1] (byte / 255), float32, shape [count, 32, 32, 3] CHANNEL-LAST (HWC):
   * pixel (y, x) of image n, channel c (0 R, 1 G, 2 B) is at ((n * 32 + y) * 32 + x) * 3 + c.
   */
  images: Float32Array;
  /** Class labels 0..9 (see CIFAR10_CLASSES), shape [count]. */
  labels: Int32Array;
  count: number;
  height: 32;
  width: 32;
  channels: 3;
}

/** The training (data_batch_1..5) and test (test_batch) splits of CIFAR-10. */
export interface Cifar10Dataset {
  train: Cifar10Split;
  test: Cifar10Split;
  /** Content digest of the six batch files as read, in order (data/identity.ts). */
  contentDigest: string;
}

const PLANE = CIFAR10_SIZE * CIFAR10_SIZE;
const SCALE = Float32Array.from({ length: 256 }, (_, v) => v / 255);

function checkLength(bytes: Uint8Array, name: string): number {
  if (bytes.length === 0)
    throw new Cifar10Error(
      `${name}: empty file, expected records of ${CIFAR10_RECORD_BYTES} bytes`,
    );
  if (bytes.length % CIFAR10_RECORD_BYTES !== 0)
    throw new Cifar10Error(
      `${name}: ${counted(bytes.length, "byte")} is not a multiple of the ${CIFAR10_RECORD_BYTES}-byte record (` +
        `${counted(Math.floor(bytes.length / CIFAR10_RECORD_BYTES), "record")} and ${counted(bytes.length % CIFAR10_RECORD_BYTES, "extra byte")}; truncated?)`,
    );
  return bytes.length / CIFAR10_RECORD_BYTES;
}

/** Decodes the records of `bytes` into images/labels starting at record `first`. */
function decodeInto(
  bytes: Uint8Array,
  name: string,
  images: Float32Array,
  labels: Int32Array,
  first: number,
): void {
  const count = bytes.length / CIFAR10_RECORD_BYTES;
  for (let r = 0; r < count; r++) {
    const rec = r * CIFAR10_RECORD_BYTES;
    const label = bytes[rec];
    if (label > 9)
      throw new Cifar10Error(
        `${name}: record ${r} (byte ${rec}) has label ${label}, expected 0..9`,
      );
    labels[first + r] = label;
    const out = (first + r) * 3 * PLANE;
    for (let c = 0; c < 3; c++) {
      const plane = rec + 1 + c * PLANE;
      for (let p = 0; p < PLANE; p++) images[out + 3 * p + c] = SCALE[bytes[plane + p]];
    }
  }
}

function split(images: Float32Array, labels: Int32Array): Cifar10Split {
  return { images, labels, count: labels.length, height: 32, width: 32, channels: 3 };
}

/**
 * Decodes one CIFAR-10 binary batch held in memory.
 *
 * @param bytes the whole batch file: N records of 3073 bytes.
 * @param name file name used in error messages.
 * @returns images float32 in [0, 1], shape [N, 32, 32, 3] CHANNEL-LAST (HWC) although the file
 *   is channel-planar; labels Int32Array 0..9; count N.
 * @throws Cifar10Error naming the file and the problem: an empty file, a length that is not a
 *   multiple of 3073 bytes, or a label above 9 (naming the record).
 */
export function decodeCifar10(bytes: Uint8Array, name: string): Cifar10Split {
  const count = checkLength(bytes, name);
  const images = new Float32Array(count * 3 * PLANE);
  const labels = new Int32Array(count);
  decodeInto(bytes, name, images, labels, 0);
  return split(images, labels);
}

async function readBatches(paths: string[], hasher: ContentHasher): Promise<Cifar10Split> {
  const files = await Promise.all(paths.map((p) => readFile(p)));
  for (const f of files) hasher.add(f);
  const counts = files.map((f, i) => checkLength(f, paths[i]));
  const total = counts.reduce((a, b) => a + b, 0);
  const images = new Float32Array(total * 3 * PLANE);
  const labels = new Int32Array(total);
  let first = 0;
  files.forEach((f, i) => {
    decodeInto(
      new Uint8Array(f.buffer, f.byteOffset, f.byteLength),
      paths[i],
      images,
      labels,
      first,
    );
    first += counts[i];
  });
  return split(images, labels);
}

/**
 * Loads CIFAR-10 from the binary distribution (cifar-10-binary.tar.gz, extracted): the
 * training split is data_batch_1.bin..data_batch_5.bin concatenated in that order (50000
 * images), the test split test_batch.bin (10000). The files may be directly in `dir` or in
 * `dir/cifar-10-batches-bin`. Each split is allocated once (train: 50000 * 3072 float32, about
 * 614 MB).
 *
 * @returns train and test splits as {@link decodeCifar10} returns them (images HWC in [0, 1]),
 *   and the content digest of the six files.
 * @throws Cifar10Error naming the folder when the files are missing, or naming the file and
 *   the problem when one is malformed (see decodeCifar10).
 */
export async function loadCifar10Dataset(dir: string): Promise<Cifar10Dataset> {
  const names = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
    "test_batch.bin",
  ];
  const candidates = [dir, join(dir, "cifar-10-batches-bin")];
  const folder = candidates.find((d) => names.every((n) => existsSync(join(d, n))));
  if (folder === undefined) {
    // Report what is missing from the more complete of the two places.
    const missing = candidates
      .map((d) => ({ d, files: names.filter((n) => !existsSync(join(d, n))) }))
      .sort((a, b) => a.files.length - b.files.length)[0];
    throw new Cifar10Error(
      `${dir}: CIFAR-10 binary batches not found here nor in cifar-10-batches-bin/ (${missing.d} lacks ${missing.files.join(", ")})`,
    );
  }
  const hasher = new ContentHasher();
  const train = await readBatches(names.slice(0, 5).map((n) => join(folder, n)), hasher);
  const test = await readBatches([join(folder, names[5])], hasher);
  return { train, test, contentDigest: hasher.digest() };
}
