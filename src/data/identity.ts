import { createHash, type Hash } from "node:crypto";
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import { parseSpec } from "./registry.ts";

/**
 * Which data a spec names, independently of how it is spelled: the content digest of what a
 * source read and the absolute path of the file or folder it read. A checkpoint records both
 * (train_state.json `data.contentDigest`, `data.path`), so a command can tell the checkpoint's
 * own training data from other data ("csv:d.csv", "csv:./d.csv" and "csv:/abs/d.csv" are the
 * same file) and notice a data file edited since training (data/evaluationInputs.ts).
 */

/**
 * A running content digest: SHA-256 over each part's byte length (64-bit little-endian) and
 * bytes, in the order the source read them (files: every file read, IDX and CIFAR-10 folders
 * several; embedded sets: their content), as "sha256:" and 64 hex digits.
 *
 * @example new ContentHasher().add(bytesOfA).add(bytesOfB).digest() // "sha256:..."
 */
export class ContentHasher {
  readonly #hash: Hash = createHash("sha256");

  /** Adds one part: bytes, or a string (as UTF-8). */
  add(part: Uint8Array | string): this {
    const bytes = typeof part === "string" ? Buffer.from(part, "utf8") : part;
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(bytes.byteLength));
    this.#hash.update(length).update(bytes);
    return this;
  }

  /** The digest of the parts added so far (the hasher cannot be used after). */
  digest(): string {
    return "sha256:" + this.#hash.digest("hex");
  }
}

/**
 * The content digest of `parts` (see {@link ContentHasher}).
 *
 * @example contentDigest([fileBytes]) // "sha256:..." (64 hex digits)
 */
export function contentDigest(parts: Iterable<Uint8Array | string>): string {
  const hasher = new ContentHasher();
  for (const p of parts) hasher.add(p);
  return hasher.digest();
}

/** A digest shortened for messages: "sha256:" and the first 16 hex digits. */
export function shortDigest(digest: string): string {
  return digest.length > 23 ? `${digest.slice(0, 23)}…` : digest;
}

/**
 * The absolute path of a file or folder (symbolic links resolved when it exists).
 *
 * @example absolutePath("./d.csv") // "/home/me/d.csv"
 */
export function absolutePath(path: string): string {
  const abs = resolve(path);
  try {
    return realpathSync(abs);
  } catch {
    return abs;
  }
}

/**
 * The absolute path of the file or folder a spec names, resolved against the current folder;
 * null for a source without an argument (an embedded set) or a spec that names no source.
 *
 * @example dataPath("csv:./d.csv") // "/home/me/d.csv"; dataPath("mnist") // null
 */
export function dataPath(spec: string): string | null {
  let arg: string | null;
  try {
    arg = parseSpec(spec).arg;
  } catch {
    return null;
  }
  return arg === null ? null : absolutePath(arg);
}

/**
 * How messages name what a spec reads: "the data file d.csv", "the data folder data/mnist",
 * "the embedded data set mnist".
 */
export function dataName(spec: string): string {
  try {
    const { source, arg } = parseSpec(spec);
    if (arg === null) return `the embedded data set ${source.name}`;
    return `the data ${source.arg === "DIR" ? "folder" : "file"} ${arg}`;
  } catch {
    return `the data ${spec}`;
  }
}
