import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  decodeSafetensors,
  encodeSafetensors,
  SafetensorsError,
} from "../../src/io/safetensors.ts";
import { readSafetensors, writeSafetensors } from "../../src/io/safetensorsFile.ts";
import { InputError } from "../../src/util/errors.ts";

/** A safetensors file from a header (object or raw text), data bytes and an optional length override. */
function raw(header: unknown, data: Uint8Array | number[] = [], headerLength?: bigint): Uint8Array {
  const json = new TextEncoder().encode(
    typeof header === "string" ? header : JSON.stringify(header),
  );
  const body = data instanceof Uint8Array ? data : Uint8Array.from(data);
  const out = new Uint8Array(8 + json.length + body.length);
  new DataView(out.buffer).setBigUint64(0, headerLength ?? BigInt(json.length), true);
  out.set(json, 8);
  out.set(body, 8 + json.length);
  return out;
}

function rejects(bytes: Uint8Array, pattern: RegExp, name = "model.safetensors"): void {
  assert.throws(
    () => decodeSafetensors(bytes, { name }),
    (e: unknown) => {
      assert.ok(e instanceof SafetensorsError, `expected SafetensorsError, got ${String(e)}`);
      assert.ok(e instanceof InputError);
      assert.match(e.message, new RegExp(`^${name.replace(".", "\\.")}: `));
      assert.match(e.message, pattern);
      return true;
    },
  );
}

const f32 = (shape: number[], offsets: unknown) => ({
  t: { dtype: "F32", shape, data_offsets: offsets },
});

test("shape [1000, 1000] F32 with data_offsets [0, 4] is rejected", () => {
  rejects(
    raw(f32([1000, 1000], [0, 4]), new Uint8Array(4)),
    /"t".*shape \[1000, 1000\].*needs 4000000 bytes.*span 4/,
  );
});

test("data_offsets [2^40, 2^40 + 16] past the data section are rejected", () => {
  rejects(
    raw(f32([4], [2 ** 40, 2 ** 40 + 16]), new Uint8Array(16)),
    /\[1099511627776, 1099511627792\].*past the data section \(16 bytes/,
  );
});

test("data_offsets [8, 4] (begin > end) are rejected", () => {
  rejects(raw(f32([1], [8, 4]), new Uint8Array(8)), /begin > end/);
});

test("a header length of 0xFFFFFFFFFFFFFFF0 is refused before any allocation", () => {
  rejects(
    raw({}, [], 0xfffffffffffffff0n),
    /header length 18446744073709551600 bytes exceeds the 100000000-byte limit/,
  );
});

test("a header length longer than the file is rejected", () => {
  rejects(
    raw("{}", [], 1000n),
    /header length 1000 bytes exceeds the 2 bytes after the length field/,
  );
});

test("data_offsets [] and [5] are rejected", () => {
  rejects(raw(f32([0], [])), /"data_offsets" must be exactly two non-negative integers.*got \[\]/);
  rejects(raw(f32([0], [5])), /"data_offsets" must be exactly two.*got \[5\]/);
  rejects(raw(f32([1], [0, 4, 8]), new Uint8Array(8)), /exactly two/);
  rejects(raw(f32([1], [-4, 0]), new Uint8Array(8)), /exactly two non-negative/);
  rejects(raw(f32([1], [0.5, 4]), new Uint8Array(8)), /exactly two non-negative integers/);
});

test("a header padded with spaces is accepted", () => {
  const text = JSON.stringify(f32([1], [0, 4])) + "       ";
  const { tensors } = decodeSafetensors(raw(text, new Uint8Array(new Float32Array([2.5]).buffer)));
  assert.deepEqual([...tensors.get("t")!.data], [2.5]);
});

test("a header padded with NUL bytes is rejected", () => {
  const json = new TextEncoder().encode(JSON.stringify(f32([1], [0, 4])));
  const padded = new Uint8Array(json.length + 5);
  padded.set(json);
  const bytes = new Uint8Array(8 + padded.length + 4);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(padded.length), true);
  bytes.set(padded, 8);
  rejects(bytes, /NUL byte at header offset \d+/);
});

test("F16 00 3E and BF16 C0 3F both decode to 1.5", () => {
  const header = {
    h: { dtype: "F16", shape: [1], data_offsets: [0, 2] },
    b: { dtype: "BF16", shape: [1], data_offsets: [2, 4] },
  };
  const { tensors } = decodeSafetensors(raw(header, [0x00, 0x3e, 0xc0, 0x3f]));
  assert.equal(tensors.get("h")!.data[0], 1.5);
  assert.equal(tensors.get("h")!.dtype, "F16");
  assert.equal(tensors.get("b")!.data[0], 1.5);
  assert.equal(tensors.get("b")!.dtype, "BF16");
});

test("F16 subnormals, zeros, infinities, NaN and extremes convert exactly", () => {
  const halves = [
    0x0001, 0x03ff, 0x0200, 0x8001, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x7bff, 0x0400,
    0xc000, 0x3555,
  ];
  const want = [
    2 ** -24,
    1023 * 2 ** -24,
    2 ** -15,
    -(2 ** -24),
    0,
    -0,
    Infinity,
    -Infinity,
    NaN,
    NaN,
    65504,
    2 ** -14,
    -2,
    2 ** -2 * (1 + 0x155 / 1024), // 0x3555: exponent 13 - 15, mantissa 0x155
  ];
  const data = new Uint8Array(new Uint16Array(halves).buffer); // little-endian host assumed by tests
  const { tensors } = decodeSafetensors(
    raw(
      { h: { dtype: "F16", shape: [halves.length], data_offsets: [0, 2 * halves.length] } },
      data,
    ),
  );
  const got = tensors.get("h")!.data;
  for (let i = 0; i < want.length; i++)
    assert.ok(
      Object.is(got[i], want[i]),
      `half 0x${halves[i].toString(16)}: got ${got[i]}, want ${want[i]}`,
    );
  // NaN payload is carried into the float32 mantissa.
  assert.equal(new Uint32Array(got.buffer)[9], 0x7f802000);
});

test("BF16 is the upper half of float32, bit-exactly", () => {
  const floats = new Float32Array([1.5, -0, Infinity, -Infinity, 3.140625, 2 ** -130]);
  const upper = new Uint16Array(floats.length);
  const bits = new Uint32Array(floats.buffer);
  for (let i = 0; i < floats.length; i++) upper[i] = bits[i] >>> 16;
  const { tensors } = decodeSafetensors(
    raw(
      { b: { dtype: "BF16", shape: [2, 3], data_offsets: [0, 12] } },
      new Uint8Array(upper.buffer),
    ),
  );
  const got = tensors.get("b")!;
  assert.deepEqual(got.shape, [2, 3]);
  for (let i = 0; i < floats.length; i++)
    assert.ok(Object.is(got.data[i], floats[i]), `${i}: ${got.data[i]} vs ${floats[i]}`);
});

test("overlapping byte ranges are rejected", () => {
  const header = {
    a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
    b: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
  };
  rejects(raw(header, new Uint8Array(12)), /"a" \[0, 8\] and "b" \[4, 12\] overlap/);
  // Identical ranges overlap too; empty ranges overlap nothing.
  const same = {
    a: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
    b: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
  };
  rejects(raw(same, new Uint8Array(4)), /overlap/);
  // An empty tensor inside another's range is refused, as the reference reader does; between two, or at either end, it is fine.
  const inside = {
    a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
    e: { dtype: "F32", shape: [0, 3], data_offsets: [4, 4] },
  };
  rejects(raw(inside, new Uint8Array(8)), /"a" \[0, 8\] and "e" \[4, 4\] overlap/);
  for (const at of [0, 4, 8]) {
    const between = {
      a: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
      b: { dtype: "F32", shape: [1], data_offsets: [4, 8] },
      e: { dtype: "F32", shape: [0, 3], data_offsets: [at, at] },
    };
    const { tensors } = decodeSafetensors(raw(between, new Uint8Array(8)));
    assert.equal(tensors.get("e")!.data.length, 0, `empty tensor at ${at}`);
  }
});

test("unknown dtype F99 and unsupported dtypes are rejected by name", () => {
  rejects(
    raw({ t: { dtype: "F99", shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4)),
    /unknown dtype "F99"/,
  );
  rejects(
    raw({ t: { dtype: "I64", shape: [1], data_offsets: [0, 8] } }, new Uint8Array(8)),
    /dtype "I64" is not supported/,
  );
  rejects(
    raw({ t: { dtype: "__proto__", shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4)),
    /unknown dtype/,
  );
});

test("truncated files are rejected: shorter than 8 bytes, or data cut", () => {
  rejects(new Uint8Array(0), /file is 0 bytes, shorter than the 8-byte header length/);
  rejects(new Uint8Array([2, 0, 0, 0, 0]), /file is 5 bytes/);
  const full = encodeSafetensors(
    new Map([["w", { data: new Float32Array([1, 2, 3, 4]), shape: [2, 2] }]]),
  );
  rejects(
    full.subarray(0, full.length - 3),
    /"w": data_offsets \[0, 16\] end past the data section \(13 bytes; file truncated\?\)/,
  );
  rejects(
    full.subarray(0, 20),
    /header length \d+ bytes exceeds the 12 bytes after the length field/,
  );
});

test("huge shape [2^31, 2^31] is rejected without overflow or allocation", () => {
  rejects(
    raw(f32([2 ** 31, 2 ** 31], [0, 16]), new Uint8Array(16)),
    /shape \[2147483648, 2147483648\] \(F32\) needs more than 2\^53 bytes but data_offsets \[0, 16\] span 16/,
  );
  rejects(
    raw(f32([2 ** 53, 2 ** 53], [0, 16]), new Uint8Array(16)),
    /"shape" must be an array of non-negative integers/,
  );
  rejects(raw(f32([2, -1], [0, 16]), new Uint8Array(16)), /"shape" must be/);
});

test("malformed headers are rejected: not JSON, not an object, bad entries, bad metadata", () => {
  rejects(raw('{"t": '), /not valid JSON/);
  rejects(raw("[1, 2]"), /must be a JSON object/);
  rejects(raw("null"), /must be a JSON object/);
  rejects(raw({ t: 3 }), /"t": header entry must be an object/);
  rejects(
    raw({ t: { shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4)),
    /missing or non-string "dtype"/,
  );
  rejects(raw({ __metadata__: { a: 1 } }), /"__metadata__" must map strings to strings/);
  const bad = raw("{}");
  bad.set([0xff, 0xfe], 8);
  rejects(bad, /not valid UTF-8/);
});

test("expectedShapes reports missing, extra and mis-shaped tensors", () => {
  const bytes = encodeSafetensors(
    new Map([
      ["a", { data: new Float32Array(6), shape: [2, 3] }],
      ["b", { data: new Float32Array(2), shape: [2] }],
    ]),
  );
  const expectedShapes = new Map([
    ["a", [3, 2]],
    ["c", [1]],
  ]);
  assert.throws(
    () => decodeSafetensors(bytes, { name: "ckpt", expectedShapes }),
    /^SafetensorsError: ckpt: tensors do not match the expected ones: missing "c"; unexpected "b"; "a" has shape \[2, 3\], expected \[3, 2\]$/,
  );
  const ok = decodeSafetensors(bytes, {
    expectedShapes: new Map([
      ["a", [2, 3]],
      ["b", [2]],
    ]),
  });
  assert.equal(ok.tensors.size, 2);
  // A config of another width mismatches every tensor: the message names the first 5 of each
  // kind and counts the rest, instead of one line per tensor.
  const many = encodeSafetensors(
    new Map(
      Array.from({ length: 8 }, (_, i) => [`w${i}`, { data: new Float32Array(2), shape: [2] }]),
    ),
  );
  const wider = new Map<string, number[]>(Array.from({ length: 8 }, (_, i) => [`w${i}`, [3]]));
  for (let i = 0; i < 7; i++) wider.set(`m${i}`, [1]);
  assert.throws(
    () => decodeSafetensors(many, { name: "ckpt", expectedShapes: wider }),
    /^SafetensorsError: ckpt: tensors do not match the expected ones: missing "m0", "m1", "m2", "m3", "m4", and 2 more; "w0" has shape \[2\], expected \[3\]; .*"w4" has shape \[2\], expected \[3\]; and 3 more tensors of other shapes$/,
  );
});

test("bytes no tensor covers are refused, naming the file and the byte range: a hole before the first tensor, between two, after the last", () => {
  // The data section must be entirely indexed (the format's README); the reference reader
  // answers InvalidOffset for a hole and MetadataIncompleteBuffer for trailing bytes.
  const two = (b: [number, number]) => ({
    a: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
    b: { dtype: "F32", shape: [2], data_offsets: b },
  });
  const headerBytes = (h: unknown) => new TextEncoder().encode(JSON.stringify(h)).length;
  // A hole in the middle: b starts 4 bytes after a ends.
  const middle = two([8, 16]);
  const at = 8 + headerBytes(middle);
  rejects(
    raw(middle, new Uint8Array(16)),
    new RegExp(
      `^model\\.safetensors: data section bytes \\[4, 8\\) \\(file bytes \\[${at + 4}, ${at + 8}\\)\\) belong to no tensor: between "a" and "b"`,
    ),
  );
  // A hole at the start.
  rejects(
    raw({ a: { dtype: "F32", shape: [1], data_offsets: [4, 8] } }, new Uint8Array(8)),
    /data section bytes \[0, 4\) .*before "a", the first tensor/,
  );
  // Trailing bytes: 2 after the last tensor; bytes with no tensor at all.
  rejects(
    raw(two([4, 12]), new Uint8Array(14)),
    /data section bytes \[12, 14\) .*after "b", the last tensor \(2 bytes appended/,
  );
  rejects(
    raw({ __metadata__: { format: "pt" } }, new Uint8Array(3)),
    /data section bytes \[0, 3\) .*the header lists no tensor/,
  );
  // One line, whatever the case.
  assert.throws(
    () => decodeSafetensors(raw(two([4, 12]), new Uint8Array(14))),
    (e: Error) => !e.message.includes("\n"),
  );
  // What the encoder writes tiles the data section exactly, empty tensors and scalars included.
  const written = encodeSafetensors(
    new Map([
      ["x", { data: new Float32Array(3), shape: [3] }],
      ["e", { data: new Float32Array(0), shape: [0] }],
      ["y", { data: new Float32Array(1), shape: [] }],
    ]),
  );
  assert.deepEqual([...decodeSafetensors(written).tensors.keys()], ["e", "x", "y"]);
});

test("a file with 1,024 bytes appended is refused: the error names the file and the appended range", () => {
  const written = encodeSafetensors(
    new Map([["w", { data: new Float32Array([1, 2, 3]), shape: [3] }]]),
    { format: "pt" },
  );
  const longer = new Uint8Array(written.length + 1024);
  longer.set(written);
  const dataStart = written.length - 12;
  rejects(
    longer,
    new RegExp(
      `data section bytes \\[12, 1036\\) \\(file bytes \\[${dataStart + 12}, ${written.length + 1024}\\)\\) belong to no tensor: after "w", the last tensor \\(1024 bytes appended`,
    ),
  );
  assert.doesNotThrow(() => decodeSafetensors(written));
});

test("a tensor whose byte length is not its dtype's size times its shape is refused, both shorter and longer", () => {
  for (const [dtype, shape, offsets, needs] of [
    ["F32", [2, 2], [0, 12], 16],
    ["F32", [3], [0, 16], 12],
    ["F16", [3], [0, 8], 6],
    ["BF16", [2, 2], [0, 6], 8],
  ] as const) {
    const span = offsets[1] - offsets[0];
    rejects(
      raw({ t: { dtype, shape, data_offsets: offsets } }, new Uint8Array(span)),
      new RegExp(
        `"t": shape \\[${shape.join(", ")}\\] \\(${dtype}\\) needs ${needs} bytes.*span ${span}`,
      ),
    );
  }
});

test("encoder: space padding to 8 bytes, deterministic sorted order, metadata first", () => {
  const make = (order: string[]) =>
    encodeSafetensors(
      new Map(order.map((k) => [k, { data: new Float32Array([k.length]), shape: [1] }])),
      { format: "pt" },
    );
  const a = make(["zeta", "10", "2", "alpha"]);
  const b = make(["alpha", "2", "zeta", "10"]);
  assert.deepEqual(a, b);
  const n = Number(new DataView(a.buffer).getBigUint64(0, true));
  assert.equal(n % 8, 0);
  const header = new TextDecoder().decode(a.subarray(8, 8 + n));
  assert.match(header, /^\{"__metadata__":\{"format":"pt"\},"10":.*"2":.*"alpha":.*"zeta":.*\} *$/);
  const { tensors, metadata } = decodeSafetensors(a);
  assert.deepEqual(metadata, { format: "pt" });
  assert.deepEqual([...tensors.keys()], ["10", "2", "alpha", "zeta"]);
  assert.deepEqual(decodeSafetensors(encodeSafetensors(new Map())).tensors.size, 0);
});

test("encoder rejects mismatched shapes and reserved names", () => {
  assert.throws(
    () => encodeSafetensors(new Map([["w", { data: new Float32Array(5), shape: [2, 3] }]])),
    /RangeError.*6 elements but data has 5|has 6 elements but data has 5/,
  );
  assert.throws(
    () => encodeSafetensors(new Map([["w", { data: new Float32Array(1), shape: [-1] }]])),
    RangeError,
  );
  assert.throws(
    () => encodeSafetensors(new Map([["__metadata__", { data: new Float32Array(1), shape: [1] }]])),
    TypeError,
  );
});

test("write -> read round trip is bit-exact and atomic (no temporary file left)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "attnlip-st-"));
  try {
    const special = new Float32Array([
      0,
      -0,
      1,
      -1,
      Infinity,
      -Infinity,
      1.401298464324817e-45,
      -1.1754942106924411e-38,
      3.4028234663852886e38,
      Math.fround(Math.PI),
    ]);
    const random = new Float32Array(1000);
    const bits = new Uint32Array(random.buffer);
    let s = 12345;
    for (let i = 0; i < bits.length; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      bits[i] = (s & 0x7f800000) === 0x7f800000 ? s & 0xbfffffff : s; // skip NaN patterns
    }
    const tensors = new Map([
      ["layer.0.weight", { data: random, shape: [10, 100] }],
      ["special", { data: special, shape: [2, 5] }],
      ["scalar", { data: new Float32Array([7]), shape: [] }],
      ["empty", { data: new Float32Array(0), shape: [0, 4] }],
      ["naïve ünicode", { data: new Float32Array([1, 2, 3]), shape: [3] }],
    ]);
    const path = join(dir, "sub", "model.safetensors");
    await writeSafetensors(path, tensors, { step: "42" });
    assert.deepEqual(await readdir(join(dir, "sub")), ["model.safetensors"]);
    const back = await readSafetensors(path, {
      expectedShapes: new Map([...tensors].map(([k, v]) => [k, v.shape])),
    });
    assert.deepEqual(back.metadata, { step: "42" });
    for (const [name, t] of tensors) {
      const got = back.tensors.get(name)!;
      assert.equal(got.dtype, "F32");
      assert.deepEqual(got.shape, t.shape);
      assert.deepEqual(new Uint32Array(got.data.buffer), new Uint32Array(t.data.buffer), name);
    }
    assert.ok(Object.is(back.tensors.get("special")!.data[1], -0));
    // Bytes on disk equal the in-memory encoding.
    assert.deepEqual(
      new Uint8Array(await readFile(path)),
      encodeSafetensors(tensors, { step: "42" }),
    );
    // Errors from readSafetensors name the path.
    await assert.rejects(readSafetensors(path, { expectedShapes: new Map() }), (e: Error) =>
      e.message.startsWith(`${path}: `),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("decoding works on an unaligned view into a larger buffer", () => {
  const file = encodeSafetensors(
    new Map([["w", { data: new Float32Array([1.25, -2.5]), shape: [2] }]]),
  );
  const big = new Uint8Array(file.length + 3);
  big.set(file, 3);
  const { tensors } = decodeSafetensors(big.subarray(3));
  assert.deepEqual([...tensors.get("w")!.data], [1.25, -2.5]);
});
