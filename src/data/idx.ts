import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { InputError } from "../util/errors.ts";
import { counted } from "../util/format.ts";
import { ContentHasher } from "./identity.ts";

/**
 * Reader of IDX files, the format of MNIST and Fashion-MNIST (Y. LeCun et al.,
 * http://yann.lecun.com/exdb/mnist/, "File formats for the MNIST database"):
 *
 *   bytes 0, 1   0x00 0x00 (magic)
 *   byte 2       element type: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64
 *   byte 3       number of dimensions d
 *   then         d dimension sizes, unsigned 32-bit BIG-endian
 *   then         the data, row-major, BIG-endian, exactly product(dims) elements
 *
 * Gzip-compressed files (first bytes 1F 8B, as distributed) are decompressed transparently.
 */

/** A problem with an IDX file; the message names the file and the problem. */
export class IdxError extends InputError {
  override name = "IdxError";
}

/** Element type of an IDX file. */
export type IdxDtype = "u8" | "i8" | "i16" | "i32" | "f32" | "f64";

/** Typed array holding IDX data, matching its dtype. */
export type IdxData =
  Uint8Array | Int8Array | Int16Array | Int32Array | Float32Array | Float64Array;

/** A decoded IDX file: element type, dimension sizes and row-major data (host byte order). */
export interface IdxTensor {
  dtype: IdxDtype;
  shape: number[];
  data: IdxData;
}

/** Largest accepted decompressed size of a gzip-compressed IDX file (1 GiB), against decompression bombs. */
export const MAX_IDX_GUNZIP_BYTES = 1 << 30;

const TYPES: Record<number, { dtype: IdxDtype; size: number }> = {
  0x08: { dtype: "u8", size: 1 },
  0x09: { dtype: "i8", size: 1 },
  0x0b: { dtype: "i16", size: 2 },
  0x0c: { dtype: "i32", size: 4 },
  0x0d: { dtype: "f32", size: 4 },
  0x0e: { dtype: "f64", size: 8 },
};

function gunzip(bytes: Uint8Array, name: string): Uint8Array {
  try {
    const out = gunzipSync(bytes, { maxOutputLength: MAX_IDX_GUNZIP_BYTES });
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === "ERR_BUFFER_TOO_LARGE" || err instanceof RangeError)
      throw new IdxError(
        `${name}: gzip content decompresses to more than ${MAX_IDX_GUNZIP_BYTES} bytes (limit)`,
      );
    throw new IdxError(`${name}: gzip decompression failed (${err.message})`);
  }
}

function readElements(body: Uint8Array, dtype: IdxDtype, count: number): IdxData {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  switch (dtype) {
    case "u8":
      return Uint8Array.from(body);
    case "i8":
      return new Int8Array(Uint8Array.from(body).buffer);
    case "i16": {
      const out = new Int16Array(count);
      for (let i = 0; i < count; i++) out[i] = view.getInt16(2 * i, false);
      return out;
    }
    case "i32": {
      const out = new Int32Array(count);
      for (let i = 0; i < count; i++) out[i] = view.getInt32(4 * i, false);
      return out;
    }
    case "f32": {
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = view.getFloat32(4 * i, false);
      return out;
    }
    case "f64": {
      const out = new Float64Array(count);
      for (let i = 0; i < count; i++) out[i] = view.getFloat64(8 * i, false);
      return out;
    }
  }
}

/**
 * Decodes an IDX file held in memory (gzip-compressed or not). The data is copied and
 * converted from big-endian; nothing is allocated before the dimension sizes have been checked
 * against the actual number of data bytes.
 *
 * @param bytes the whole file.
 * @param name file name used in error messages.
 * @returns { dtype, shape: the d dimension sizes, data: product(shape) elements, row-major }.
 * @throws IdxError naming the file and the problem: gzip failure or a decompressed size over
 *   1 GiB, a truncated header, a bad magic number, an unknown type byte, or a data size that
 *   differs from product(shape) * element size (both sizes named, in bytes).
 */
export function decodeIdx(bytes: Uint8Array, name: string): IdxTensor {
  if (bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = gunzip(bytes, name);
  if (bytes.length < 4)
    throw new IdxError(
      `${name}: truncated header: ${counted(bytes.length, "byte")}, expected at least 4 (magic, type, number of dimensions)`,
    );
  if (bytes[0] !== 0 || bytes[1] !== 0)
    throw new IdxError(
      `${name}: bad magic: first two bytes are ${hex(bytes[0])} ${hex(bytes[1])}, expected 00 00 (not an IDX file?)`,
    );
  const type = TYPES[bytes[2]];
  if (type === undefined)
    throw new IdxError(
      `${name}: unknown element type byte ${hex(bytes[2])} (known: 08 u8, 09 i8, 0B i16, 0C i32, 0D f32, 0E f64)`,
    );
  const ndims = bytes[3];
  const headerLength = 4 + 4 * ndims;
  if (bytes.length < headerLength)
    throw new IdxError(
      `${name}: truncated header: ${ndims} dimensions need ${headerLength} header bytes but the file has ${bytes.length}`,
    );
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const shape: number[] = [];
  for (let i = 0; i < ndims; i++) shape.push(view.getUint32(4 + 4 * i, false));
  // Exact, whatever the dimensions (up to 255 of them, each < 2^32).
  const expected = shape.reduce((a, d) => a * BigInt(d), BigInt(type.size));
  const actual = bytes.length - headerLength;
  if (expected !== BigInt(actual))
    throw new IdxError(
      `${name}: dimensions [${shape.join(", ")}] of ${type.dtype} (${counted(type.size, "byte")} each) need ${counted(expected, "data byte")}, but the file has ${actual}`,
    );
  const count = actual / type.size;
  return {
    dtype: type.dtype,
    shape,
    data: readElements(bytes.subarray(headerLength), type.dtype, count),
  };
}

function hex(b: number): string {
  return b.toString(16).toUpperCase().padStart(2, "0");
}

/**
 * Reads and decodes an IDX file, gzip-compressed or not (see {@link decodeIdx}).
 *
 * @param hasher when given, the file's bytes (as read, compressed or not) are added to it.
 * @throws IdxError naming `path` on a malformed file; the file-system error when unreadable.
 */
export async function readIdx(path: string, hasher?: ContentHasher): Promise<IdxTensor> {
  const bytes = await readFile(path);
  hasher?.add(bytes);
  return decodeIdx(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), path);
}

/** One split of an image-classification data set read from IDX files. */
export interface IdxSplit {
  /** Pixels scaled to [0, 1] (byte / 255), float32, shape [count, height, width] row-major. */
  images: Float32Array;
  /** Class labels 0..9, shape [count]. */
  labels: Int32Array;
  count: number;
  height: number;
  width: number;
}

/** The training and test splits of an MNIST-style data set. */
export interface IdxDataset {
  train: IdxSplit;
  test: IdxSplit;
  /**
   * Content digest of the four files as read (data/identity.ts): training images, training
   * labels, test images, test labels.
   */
  contentDigest: string;
}

/** Finds `<prefix>-<kind>-idx<d>-ubyte`, also with ".idx" instead of "-idx" and/or ".gz". */
function findFile(dir: string, prefix: string, kind: string, dims: number): string {
  const tried: string[] = [];
  for (const sep of ["-", "."])
    for (const gz of ["", ".gz"]) {
      const file = `${prefix}-${kind}${sep}idx${dims}-ubyte${gz}`;
      tried.push(file);
      if (existsSync(join(dir, file))) return join(dir, file);
    }
  throw new IdxError(`${dir}: no ${prefix} ${kind} file found (looked for ${tried.join(", ")})`);
}

async function loadSplit(dir: string, prefix: "train" | "t10k", hasher: ContentHasher): Promise<IdxSplit> {
  const imagesPath = findFile(dir, prefix, "images", 3);
  const labelsPath = findFile(dir, prefix, "labels", 1);
  const images = await readIdx(imagesPath, hasher);
  if (images.dtype !== "u8" || images.shape.length !== 3)
    throw new IdxError(
      `${imagesPath}: expected unsigned bytes of shape [count, rows, cols], got ${images.dtype} of shape [${images.shape.join(", ")}]`,
    );
  const labels = await readIdx(labelsPath, hasher);
  if (labels.dtype !== "u8" || labels.shape.length !== 1)
    throw new IdxError(
      `${labelsPath}: expected unsigned bytes of shape [count], got ${labels.dtype} of shape [${labels.shape.join(", ")}]`,
    );
  const [count, height, width] = images.shape;
  if (labels.shape[0] !== count)
    throw new IdxError(
      `${labelsPath}: ${labels.shape[0]} labels but ${imagesPath} has ${count} images`,
    );
  const labelData = Int32Array.from(labels.data);
  const bad = labelData.findIndex((l) => l > 9);
  if (bad >= 0)
    throw new IdxError(`${labelsPath}: label ${bad} is ${labelData[bad]}, expected 0..9`);
  const pixels = new Float32Array(images.data.length);
  const scale = Float32Array.from({ length: 256 }, (_, v) => v / 255);
  for (let i = 0; i < pixels.length; i++) pixels[i] = scale[images.data[i]];
  return { images: pixels, labels: labelData, count, height, width };
}

/**
 * Loads an MNIST-style data set (MNIST, Fashion-MNIST) from a folder holding
 * train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
 * t10k-labels-idx1-ubyte, each possibly gzip-compressed (".gz") and with ".idx" in place of
 * "-idx" as some mirrors name them.
 *
 * @param dir the folder.
 * @returns train and test splits: images as float32 in [0, 1], shape [count, height, width]
 *   (flattened, row-major), labels as Int32Array in 0..9; the content digest of the files.
 * @throws IdxError naming the file and the problem: a missing file, a malformed IDX file,
 *   images that are not unsigned bytes of rank 3, labels that are not unsigned bytes of rank 1,
 *   image and label counts that differ, a label above 9, or train and test image sizes that
 *   differ.
 */
export async function loadIdxDataset(dir: string): Promise<IdxDataset> {
  const hasher = new ContentHasher();
  const train = await loadSplit(dir, "train", hasher);
  const test = await loadSplit(dir, "t10k", hasher);
  if (train.height !== test.height || train.width !== test.width)
    throw new IdxError(
      `${dir}: train images are ${train.height}x${train.width} but test images are ${test.height}x${test.width}`,
    );
  return { train, test, contentDigest: hasher.digest() };
}
