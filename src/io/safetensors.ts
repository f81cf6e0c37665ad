import { InputError } from "../util/errors.ts";
import { counted } from "../util/format.ts";
import { DuplicateKeyError, parseJsonStrict } from "./strictJson.ts";

/**
 * Reader and writer of the Hugging Face safetensors format
 * (https://github.com/huggingface/safetensors, "Format" section of its README):
 *
 *   bytes 0..8      N, the header length, unsigned 64-bit little-endian
 *   bytes 8..8+N    UTF-8 JSON header: { name: { dtype, shape, data_offsets: [begin, end] }, ...,
 *                   optional "__metadata__": { string: string } }, possibly padded with spaces
 *   bytes 8+N..     the data section: raw little-endian, row-major tensor data; data_offsets are
 *                   byte offsets relative to the start of this section, end exclusive
 *
 * The data section is entirely indexed: sorted by data_offsets, each tensor begins where the
 * previous one ends, the first at 0 and the last at the end of the file, so no byte belongs to
 * no tensor or to two ("the byte buffer needs to be entirely indexed, and cannot contain
 * holes", the format's README; the reference reader refuses a hole or an overlap with
 * InvalidOffset and bytes after the last tensor with MetadataIncompleteBuffer). This reader
 * refuses the same files.
 *
 * Bytes in, bytes out: nothing here touches the file system, so the format runs in a browser
 * (readSafetensors and writeSafetensors, in safetensorsFile.ts, add the files). The reader
 * validates every length and offset before it allocates anything from it, so a
 * corrupt or hostile file gives a SafetensorsError naming the file and the problem, never a
 * huge allocation or an out-of-range read.
 */

/** A problem with a safetensors file; the message names the file and the problem. */
export class SafetensorsError extends InputError {
  override name = "SafetensorsError";
}

/** Largest accepted header, in bytes (100 MB, as in the reference implementation). */
export const MAX_HEADER_BYTES = 100_000_000;

/** The dtypes this module reads; each is returned as float32. */
export type SafetensorsDtype = "F32" | "F16" | "BF16";

const BYTES_PER_ELEMENT: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };

/** Dtypes of the format that exist but that this reader does not convert (named in errors). */
const UNSUPPORTED_DTYPES: Record<string, number> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  F8_E8M0: 1,
  F4: 1,
  F6_E2M3: 1,
  F6_E3M2: 1,
  I16: 2,
  U16: 2,
  I32: 4,
  U32: 4,
  F64: 8,
  I64: 8,
  U64: 8,
  C64: 8,
};

/** A tensor to write: float32 data in row-major order and its shape (product(shape) == data.length). */
export interface TensorToWrite {
  data: Float32Array;
  shape: number[];
}

/** A tensor read back: data converted to float32 (row-major), its shape and its dtype in the file. */
export interface DecodedTensor {
  data: Float32Array;
  shape: number[];
  dtype: SafetensorsDtype;
}

/** Options of {@link decodeSafetensors} and {@link readSafetensors}. */
export interface DecodeSafetensorsOptions {
  /** Name of the file used in error messages (readSafetensors defaults it to the path). */
  name?: string;
  /**
   * When given, the file must hold exactly these tensors with exactly these shapes; missing,
   * extra and mis-shaped tensors are all reported in one error.
   */
  expectedShapes?: Map<string, number[]>;
}

/** The content of a safetensors file. */
export interface DecodedSafetensors {
  /** The tensors, in the order of their data offsets (ties by name). */
  tensors: Map<string, DecodedTensor>;
  /** The "__metadata__" entry; an empty object when the file has none. */
  metadata: Record<string, string>;
}

const littleEndianHost = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function formatShape(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function checkShapeForWrite(name: string, shape: unknown, length: number): number[] {
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0))
    throw new RangeError(
      `encodeSafetensors: tensor "${name}": shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`,
    );
  const count = shape.reduce((a: number, b: number) => a * b, 1);
  if (count !== length)
    throw new RangeError(
      `encodeSafetensors: tensor "${name}": shape ${formatShape(shape)} has ${count} elements but data has ${length}`,
    );
  return [...shape];
}

/**
 * Encodes float32 tensors as a safetensors file (dtype "F32" only).
 *
 * The output is deterministic: "__metadata__" first (when given), then the tensors sorted by
 * name (UTF-16 code-unit order), their data laid out contiguously in the same order. The JSON
 * header is padded with spaces so that the data section starts at a multiple of 8 bytes.
 * Values are stored bit-exactly (including -0, subnormals, infinities and NaN payloads).
 *
 * @param tensors name -> { data: Float32Array of length product(shape), shape }.
 * @param metadata optional string -> string map stored as "__metadata__".
 * @param options.dtype how values are stored: "F32" (default, bit-exact), "F16" or "BF16"
 *   (rounded to nearest, ties to even; overflow to infinity; NaN stays NaN).
 * @returns the file's bytes.
 * @throws RangeError when a shape is not an array of non-negative integers or does not match
 *   the data length; TypeError on a tensor named "__metadata__" or a non-string metadata value.
 */
export function encodeSafetensors(
  tensors: Map<string, TensorToWrite>,
  metadata?: Record<string, string>,
  options: { dtype?: SafetensorsDtype } = {},
): Uint8Array {
  const dtype = options.dtype ?? "F32";
  const width = BYTES_PER_ELEMENT[dtype];
  const names = [...tensors.keys()].sort();
  const parts: string[] = [];
  if (metadata !== undefined) {
    for (const [key, value] of Object.entries(metadata))
      if (typeof value !== "string")
        throw new TypeError(
          `encodeSafetensors: metadata "${key}" must be a string, got ${typeof value}`,
        );
    parts.push(`"__metadata__":${JSON.stringify(metadata)}`);
  }
  let offset = 0;
  const shapes: number[][] = [];
  for (const name of names) {
    if (name === "__metadata__")
      throw new TypeError(`encodeSafetensors: "__metadata__" is reserved, not a tensor name`);
    const { data, shape } = tensors.get(name)!;
    if (!(data instanceof Float32Array))
      throw new TypeError(`encodeSafetensors: tensor "${name}": data must be a Float32Array`);
    const checked = checkShapeForWrite(name, shape, data.length);
    shapes.push(checked);
    const end = offset + data.length * width;
    // Built by hand (not JSON.stringify of an object) so integer-like names keep the sorted order.
    parts.push(
      `${JSON.stringify(name)}:{"dtype":"${dtype}","shape":${JSON.stringify(checked)},"data_offsets":[${offset},${end}]}`,
    );
    offset = end;
  }
  const json = new TextEncoder().encode(`{${parts.join(",")}}`);
  const headerLength = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLength);
  let at = 8 + headerLength;
  const view = new DataView(out.buffer);
  for (const name of names) {
    const { data } = tensors.get(name)!;
    if (dtype !== "F32") {
      const bits = new Uint32Array(Float32Array.from(data).buffer);
      const toHalf = dtype === "F16" ? floatToHalfBits : floatToBfloatBits;
      for (let i = 0; i < bits.length; i++) view.setUint16(at + 2 * i, toHalf(bits[i]), true);
      at += 2 * data.length;
      continue;
    }
    if (littleEndianHost)
      out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at);
    else {
      // Write the bit pattern, not the value, so NaN payloads survive.
      const bits = new Uint32Array(Float32Array.from(data).buffer);
      for (let i = 0; i < bits.length; i++) view.setUint32(at + 4 * i, bits[i], true);
    }
    at += data.byteLength;
  }
  return out;
}

/**
 * float32 bits -> IEEE 754 binary16 bits, rounded to nearest (ties to even); values beyond the
 * half range become infinities, NaN stays NaN (quiet), tiny values become subnormals or zero.
 *
 * @example floatToHalfBits(0x3f800000) // 0x3c00 (1.0)
 */
export function floatToHalfBits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // the half exponent: exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++; // a carry into the exponent is the right rounding
  return sign | half;
}

/**
 * float32 bits -> bfloat16 bits (the upper half), rounded to nearest (ties to even); NaN stays NaN.
 *
 * @example floatToBfloatBits(0x3f800000) // 0x3f80 (1.0)
 */
export function floatToBfloatBits(x: number): number {
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) & 0xffff) | 0x40;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Converts one IEEE 754 binary16 bit pattern to float32 bits (exact: every half is a float). */
function halfToFloatBits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exponent = (h >> 10) & 0x1f;
  let mantissa = h & 0x3ff;
  if (exponent === 0x1f) return (sign | 0x7f800000 | (mantissa << 13)) >>> 0; // inf, NaN (payload kept)
  if (exponent !== 0) return (sign | ((exponent - 15 + 127) << 23) | (mantissa << 13)) >>> 0;
  if (mantissa === 0) return sign >>> 0; // +-0
  // Subnormal half: value = mantissa * 2^-24; normalize it for float32.
  let e = -14;
  while ((mantissa & 0x400) === 0) {
    mantissa <<= 1;
    e--;
  }
  return (sign | ((e + 127) << 23) | ((mantissa & 0x3ff) << 13)) >>> 0;
}

function convert(
  bytes: Uint8Array,
  begin: number,
  count: number,
  dtype: SafetensorsDtype,
): Float32Array {
  const out = new Float32Array(count);
  if (count === 0) return out;
  const view = new DataView(
    bytes.buffer,
    bytes.byteOffset + begin,
    count * BYTES_PER_ELEMENT[dtype],
  );
  if (dtype === "F32") {
    if (littleEndianHost) new Uint8Array(out.buffer).set(bytes.subarray(begin, begin + 4 * count));
    else {
      const bits = new Uint32Array(out.buffer);
      for (let i = 0; i < count; i++) bits[i] = view.getUint32(4 * i, true);
    }
    return out;
  }
  const bits = new Uint32Array(out.buffer);
  if (dtype === "BF16")
    for (let i = 0; i < count; i++) bits[i] = (view.getUint16(2 * i, true) << 16) >>> 0;
  else for (let i = 0; i < count; i++) bits[i] = halfToFloatBits(view.getUint16(2 * i, true));
  return out;
}

interface Entry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  count: number;
  begin: number;
  end: number;
}

function isOffset(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function parseEntry(file: string, name: string, value: unknown, dataLength: number): Entry {
  const where = `${file}: tensor "${name}"`;
  if (!isPlainObject(value))
    throw new SafetensorsError(
      `${where}: header entry must be an object, got ${JSON.stringify(value)}`,
    );
  const { dtype, shape, data_offsets: offsets } = value;
  if (typeof dtype !== "string")
    throw new SafetensorsError(`${where}: missing or non-string "dtype"`);
  if (!Object.hasOwn(BYTES_PER_ELEMENT, dtype)) {
    if (Object.hasOwn(UNSUPPORTED_DTYPES, dtype))
      throw new SafetensorsError(
        `${where}: dtype "${dtype}" is not supported (supported: F32, F16, BF16)`,
      );
    throw new SafetensorsError(`${where}: unknown dtype "${dtype}" (supported: F32, F16, BF16)`);
  }
  const dt = dtype as SafetensorsDtype;
  if (!Array.isArray(shape) || !shape.every(isOffset))
    throw new SafetensorsError(
      `${where}: "shape" must be an array of non-negative integers, got ${JSON.stringify(shape)}`,
    );
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isOffset))
    throw new SafetensorsError(
      `${where}: "data_offsets" must be exactly two non-negative integers [begin, end], got ${JSON.stringify(offsets)}`,
    );
  const [begin, end] = offsets as [number, number];
  if (begin > end)
    throw new SafetensorsError(`${where}: data_offsets [${begin}, ${end}] has begin > end`);
  if (end > dataLength)
    throw new SafetensorsError(
      `${where}: data_offsets [${begin}, ${end}] end past the data section (${counted(dataLength, "byte")}; file truncated?)`,
    );
  const span = end - begin;
  const bpe = BYTES_PER_ELEMENT[dt];
  // Element count, stopping as soon as it exceeds the span (so no overflow, whatever the shape).
  let count = shape.includes(0) ? 0 : 1;
  if (count !== 0)
    for (const d of shape as number[]) {
      count *= d;
      if (count > span) {
        // Only for the message: a float product (may be inexact or Infinity), never allocated.
        const need = (shape as number[]).reduce((a, b) => a * b, bpe);
        const needText = Number.isSafeInteger(need)
          ? counted(need, "byte")
          : "more than 2^53 bytes";
        throw new SafetensorsError(
          `${where}: shape ${formatShape(shape)} (${dt}) needs ${needText} but data_offsets [${begin}, ${end}] span ${span}`,
        );
      }
    }
  if (count * bpe !== span)
    throw new SafetensorsError(
      `${where}: shape ${formatShape(shape)} (${dt}) needs ${counted(count * bpe, "byte")} (${counted(count, "element")} x ${bpe}) but data_offsets [${begin}, ${end}] span ${span}`,
    );
  return { name, dtype: dt, shape: [...(shape as number[])], count, begin, end };
}

/**
 * Decodes a safetensors file held in memory. F32, F16 and BF16 tensors are returned as
 * Float32Array (F16 and BF16 converted exactly, including subnormals, infinities and NaN);
 * the arrays are copies, independent of `bytes`.
 *
 * Checks, before allocating anything from a length read in the file: the 8-byte header length
 * is <= 100 MB and fits in the file; the header is UTF-8 JSON without NUL bytes (trailing
 * spaces are fine), an object that names no key twice at any depth (a tensor listed twice
 * is refused, not loaded from its last entry); "__metadata__" maps strings to strings; each
 * tensor has a supported dtype, a shape of non-negative integers and data_offsets of exactly two
 * non-negative integers with begin <= end <= data section length and end - begin ==
 * product(shape) * bytes per element; the tensors, sorted by data_offsets, tile the data
 * section: no two overlap (an empty tensor sits between two others, not inside one), no bytes
 * between two of them or after the last (see the module comment); optionally the expected
 * names and shapes.
 *
 * @param bytes the whole file.
 * @returns the tensors (in data-offset order) and the metadata.
 * @throws SafetensorsError (an InputError) naming the file, the tensor and the problem: for
 *   bytes no tensor covers, their range in the data section and in the file, e.g.
 *   `model.safetensors: data section bytes [1200, 2224) (file bytes [1336, 2360)) belong to no
 *   tensor: ...`.
 * @example decodeSafetensors(encodeSafetensors(new Map([["w", { data: new Float32Array(2), shape: [2] }]]))).tensors.get("w")?.shape // [2]
 */
export function decodeSafetensors(
  bytes: Uint8Array,
  options: DecodeSafetensorsOptions = {},
): DecodedSafetensors {
  const file = options.name ?? "safetensors";
  if (bytes.length < 8)
    throw new SafetensorsError(
      `${file}: file is ${counted(bytes.length, "byte")}, shorter than the 8-byte header length (truncated?)`,
    );
  const headerLength = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (headerLength > BigInt(MAX_HEADER_BYTES))
    throw new SafetensorsError(
      `${file}: header length ${counted(headerLength, "byte")} exceeds the ${MAX_HEADER_BYTES}-byte limit`,
    );
  if (headerLength > BigInt(bytes.length - 8))
    throw new SafetensorsError(
      `${file}: header length ${counted(headerLength, "byte")} exceeds the ${counted(bytes.length - 8, "byte")} after the length field (truncated?)`,
    );
  const n = Number(headerLength);
  if (n < 2)
    throw new SafetensorsError(`${file}: header length ${n} is too short for a JSON object`);
  const headerBytes = bytes.subarray(8, 8 + n);
  const nul = headerBytes.indexOf(0);
  if (nul >= 0)
    throw new SafetensorsError(
      `${file}: header contains a NUL byte at header offset ${nul} (pad with spaces, not NUL)`,
    );
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(headerBytes);
  } catch {
    throw new SafetensorsError(`${file}: header is not valid UTF-8`);
  }
  let header: unknown;
  try {
    // A tensor listed twice would load its last entry silently (JSON.parse keeps the last).
    header = parseJsonStrict(text);
  } catch (e) {
    if (e instanceof DuplicateKeyError) throw new SafetensorsError(`${file}: header: ${e.message}`);
    throw new SafetensorsError(`${file}: header is not valid JSON (${(e as Error).message})`);
  }
  if (!isPlainObject(header)) throw new SafetensorsError(`${file}: header must be a JSON object`);

  const dataStart = 8 + n;
  const dataLength = bytes.length - dataStart;
  let metadata: Record<string, string> = {};
  const entries: Entry[] = [];
  for (const key of Object.keys(header)) {
    const value = header[key];
    if (key === "__metadata__") {
      if (!isPlainObject(value) || !Object.values(value).every((v) => typeof v === "string"))
        throw new SafetensorsError(`${file}: "__metadata__" must map strings to strings`);
      metadata = { ...(value as Record<string, string>) };
      continue;
    }
    entries.push(parseEntry(file, key, value, dataLength));
  }

  entries.sort(
    (a, b) =>
      a.begin - b.begin || a.end - b.end || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
  checkTiling(file, entries, dataStart, dataLength);

  if (options.expectedShapes !== undefined)
    checkExpectedShapes(file, entries, options.expectedShapes);

  const tensors = new Map<string, DecodedTensor>();
  for (const e of entries)
    tensors.set(e.name, {
      data: convert(bytes, dataStart + e.begin, e.count, e.dtype),
      shape: e.shape,
      dtype: e.dtype,
    });
  return { tensors, metadata };
}

/**
 * The reference reader's rule (module comment): sorted by (begin, end), each tensor begins
 * where the previous ended, and the last ends at the end of the data section.
 *
 * @param entries sorted by begin, then end. @param dataStart the data section's offset in the file.
 * @throws SafetensorsError naming the file and the two overlapping tensors, or the bytes no
 *   tensor covers (in the data section and in the file).
 */
function checkTiling(
  file: string,
  entries: readonly Entry[],
  dataStart: number,
  dataLength: number,
): void {
  const unindexed = (from: number, to: number, where: string) =>
    new SafetensorsError(
      `${file}: data section bytes [${from}, ${to}) (file bytes [${dataStart + from}, ${dataStart + to})) belong to no tensor: ${where}; the format indexes the whole data section, without holes`,
    );
  let covered = 0;
  let previous: Entry | undefined;
  for (const e of entries) {
    if (previous !== undefined && e.begin < covered)
      throw new SafetensorsError(
        `${file}: tensors "${previous.name}" [${previous.begin}, ${previous.end}] and "${e.name}" [${e.begin}, ${e.end}] overlap`,
      );
    if (e.begin > covered)
      throw unindexed(
        covered,
        e.begin,
        previous === undefined
          ? `before "${e.name}", the first tensor`
          : `between "${previous.name}" and "${e.name}"`,
      );
    covered = e.end;
    previous = e;
  }
  if (covered < dataLength)
    throw unindexed(
      covered,
      dataLength,
      previous === undefined
        ? "the header lists no tensor"
        : `after "${previous.name}", the last tensor (${counted(dataLength - covered, "byte")} appended to the file?)`,
    );
}

/** The first 5 items joined, then "and N more[ noun]" when there are more. */
function firstFew(items: string[], separator = ", ", noun = ""): string {
  const rest = items.length - 5;
  const shown = items.slice(0, 5).join(separator);
  return rest > 0 ? `${shown}${separator}and ${rest} more${noun === "" ? "" : ` ${noun}`}` : shown;
}

function checkExpectedShapes(
  file: string,
  entries: Entry[],
  expected: Map<string, number[]>,
): void {
  const found = new Map(entries.map((e) => [e.name, e.shape]));
  const problems: string[] = [];
  const missing = [...expected.keys()].filter((k) => !found.has(k));
  const extra = [...found.keys()].filter((k) => !expected.has(k));
  // A config that does not fit its weights (another width, say) mismatches every tensor: the
  // first few of each kind name the problem, the count says how far it goes.
  if (missing.length > 0) problems.push(`missing ${firstFew(missing.map((k) => `"${k}"`))}`);
  if (extra.length > 0) problems.push(`unexpected ${firstFew(extra.map((k) => `"${k}"`))}`);
  const wrong: string[] = [];
  for (const [k, want] of expected) {
    const got = found.get(k);
    if (got !== undefined && (got.length !== want.length || got.some((d, i) => d !== want[i])))
      wrong.push(`"${k}" has shape ${formatShape(got)}, expected ${formatShape(want)}`);
  }
  if (wrong.length > 0) problems.push(firstFew(wrong, "; ", "tensors of other shapes"));
  if (problems.length > 0)
    throw new SafetensorsError(
      `${file}: tensors do not match the expected ones: ${problems.join("; ")}`,
    );
}
