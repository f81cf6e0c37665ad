import { createHash } from "node:crypto";
import { endianness } from "node:os";
import type { ImageSplit } from "./dataset.ts";
import type { TextSplit } from "./text/dataset.ts";

/**
 * Input fingerprints: a short hash of each example's model input, so that an input the model
 * was trained on is recognised in any file, order or format (a re-sorted or re-exported copy
 * of the training data, an appended row, the same digits as IDX files), and left out of every
 * evaluation (data/evaluationInputs.ts, the trainer's test split).
 *
 * What is hashed is what the model reads, not the file's bytes: an image's float32 pixels
 * (HWC, in [0, 1]); a text's token ids up to its last real token (after the tokenizer's
 * normalisation and truncation to maxLength: two texts that differ only after the first
 * maxLength tokens are the same input to the model). Near-duplicates (one pixel changed, one
 * word changed) are other inputs and are not recognised.
 *
 * A fingerprint is the first 64 bits of SHA-256 of those bytes, as 16 hex digits: among 10^5
 * training and 10^5 evaluated inputs the chance of one false match is about 5e-10.
 */

/** A set of input fingerprints (16 hex digits each). */
export type Fingerprints = ReadonlySet<string>;

/** Which model input a fingerprint hashes (recorded in the checkpoint's fingerprints.json). */
export type FingerprintInput = "float32-pixels" | "int32-token-ids";

function hash(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex").slice(0, 16);
}

const LITTLE_ENDIAN = endianness() === "LE";

/**
 * Little-endian bytes of float32 or int32 values, whatever the platform's byte order (on a
 * little-endian platform, the values' own bytes, not a copy: this runs once per example).
 */
function littleEndian(values: Float32Array | Int32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const view = new DataView(new ArrayBuffer(4 * values.length));
  if (values instanceof Float32Array) for (let i = 0; i < values.length; i++) view.setFloat32(4 * i, values[i], true);
  else for (let i = 0; i < values.length; i++) view.setInt32(4 * i, values[i], true);
  return new Uint8Array(view.buffer);
}

/**
 * The fingerprint of each example of a split, in split order.
 *
 * @param split an image split (images [count, h, w, c] float32) or a text split (ids
 *   [count, length] int32 with each row's real length).
 * @returns count fingerprints (16 hex digits each); equal inputs give equal fingerprints.
 * @example
 *   const fps = inputFingerprints(dataset.train); // ["3f1c0a9d2b7e4c55", ...]
 */
export function inputFingerprints(split: ImageSplit | TextSplit): string[] {
  const out: string[] = new Array(split.count);
  if ("images" in split) {
    const size = split.shape[0] * split.shape[1] * split.shape[2];
    for (let i = 0; i < split.count; i++) out[i] = hash(littleEndian(split.images.subarray(i * size, (i + 1) * size)));
  } else {
    for (let i = 0; i < split.count; i++) {
      const start = i * split.length;
      out[i] = hash(littleEndian(split.ids.subarray(start, start + split.lengths[i])));
    }
  }
  return out;
}

/** Which input a split's fingerprints hash. */
export function fingerprintInput(split: ImageSplit | TextSplit): FingerprintInput {
  return "images" in split ? "float32-pixels" : "int32-token-ids";
}

/** The set of fingerprints of a split's examples (the training inputs a model saw). */
export function fingerprintSet(split: ImageSplit | TextSplit): Set<string> {
  return new Set(inputFingerprints(split));
}

/** Positions of a split, in order, split by whether their input is one of `seen`. */
export interface HeldOutPositions {
  /** Positions (0-based, in split order) whose input is not among `seen`. */
  kept: number[];
  /** Positions whose input is among `seen` (left out). */
  seen: number[];
}

/**
 * Splits a split's positions into those whose input is held out and those whose input equals
 * one of `seen` (training inputs).
 *
 * @param seen training fingerprints; null: nothing known, every position is kept.
 * @param limit stop once this many held-out positions are found (default: all).
 * @example heldOutPositions(testSplit, fingerprintSet(trainSplit)).kept.length
 */
export function heldOutPositions(
  split: ImageSplit | TextSplit,
  seen: Fingerprints | null,
  limit = Infinity,
): HeldOutPositions {
  const kept: number[] = [];
  const left: number[] = [];
  if (seen === null || seen.size === 0) {
    for (let i = 0; i < Math.min(split.count, limit); i++) kept.push(i);
    return { kept, seen: left };
  }
  const fps = inputFingerprints(split);
  for (let i = 0; i < split.count && kept.length < limit; i++) (seen.has(fps[i]) ? left : kept).push(i);
  return { kept, seen: left };
}

/**
 * Fingerprints as bytes for a file: each 16-hex-digit fingerprint as 8 bytes, sorted (the
 * order of the training data is not kept), base64-encoded.
 *
 * @throws RangeError on a fingerprint that is not 16 hex digits.
 */
export function encodeFingerprints(set: Fingerprints): string {
  return fingerprintBytes(set).toString("base64");
}

/** The sorted 8-byte fingerprints, back to back. @throws RangeError on a fingerprint that is not 16 hex digits. */
function fingerprintBytes(set: Fingerprints): Buffer {
  const sorted = [...set].sort();
  const bytes = Buffer.alloc(8 * sorted.length);
  sorted.forEach((fp, i) => {
    if (!/^[0-9a-f]{16}$/.test(fp)) throw new RangeError(`encodeFingerprints: "${fp}" is not 16 hex digits`);
    bytes.write(fp, 8 * i, "hex");
  });
  return bytes;
}

/**
 * A digest of a set of fingerprints (SHA-256 of the sorted 8-byte values, "sha256:" and 16
 * hex digits), recorded in train_state.json so that a fingerprints.json emptied, zeroed or
 * edited since training is refused.
 *
 * @example fingerprintDigest(new Set(["0000000000000001"])) // "sha256:..."
 */
export function fingerprintDigest(set: Fingerprints): string {
  return "sha256:" + createHash("sha256").update(fingerprintBytes(set)).digest("hex").slice(0, 16);
}

/**
 * The set {@link encodeFingerprints} wrote.
 *
 * @param count the number of fingerprints recorded beside them.
 * @throws RangeError when the text is not canonical base64 of count * 8 bytes, or the
 *   fingerprints are not sorted and distinct (as encodeFingerprints writes them).
 */
export function decodeFingerprints(base64: string, count: number): Set<string> {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) throw new RangeError("fingerprints: not base64 text");
  const bytes = Buffer.from(base64, "base64");
  if (bytes.toString("base64") !== base64) throw new RangeError("fingerprints: not canonical base64 (padding or trailing bits)");
  if (bytes.length !== 8 * count)
    throw new RangeError(`fingerprints: ${bytes.length} bytes, expected ${8 * count} (${count} fingerprints of 8 bytes)`);
  const set = new Set<string>();
  let previous = "";
  for (let i = 0; i < count; i++) {
    const fp = bytes.subarray(8 * i, 8 * i + 8).toString("hex");
    if (fp <= previous) throw new RangeError(`fingerprints: not sorted and distinct at fingerprint ${i + 1}`);
    set.add(fp);
    previous = fp;
  }
  return set;
}
