// Messages that count bytes (and records, elements) say "1 byte", not "1 bytes": one helper,
// util/format.ts counted(), words every such count in the file readers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeCifar10 } from "../../src/data/cifar10.ts";
import { decodeIdx } from "../../src/data/idx.ts";
import { decodeSafetensors } from "../../src/io/safetensors.ts";
import { counted } from "../../src/util/format.ts";

test("counted: singular for exactly one, numbers and bigints", () => {
  assert.equal(counted(1, "byte"), "1 byte");
  assert.equal(counted(0, "byte"), "0 bytes");
  assert.equal(counted(2, "byte"), "2 bytes");
  assert.equal(counted(1n, "byte"), "1 byte");
  assert.equal(counted(2n ** 64n, "byte"), "18446744073709551616 bytes");
  assert.equal(counted(1, "entry", "entries"), "1 entry");
  assert.equal(counted(3, "entry", "entries"), "3 entries");
});

/** A safetensors file: the 8-byte header length, the header text, the data bytes. */
function safetensors(header: string, data: number[], length = header.length): Uint8Array {
  const out = new Uint8Array(8 + header.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(length), true);
  out.set(new TextEncoder().encode(header), 8);
  out.set(data, 8 + header.length);
  return out;
}

const messageOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  assert.fail("expected an error");
};

test("safetensors, IDX and CIFAR-10 errors count one byte as 1 byte", () => {
  const st = (bytes: Uint8Array) =>
    messageOf(() => decodeSafetensors(bytes, { name: "m.safetensors" }));
  assert.match(st(new Uint8Array(1)), /^m\.safetensors: file is 1 byte, shorter than/);
  assert.match(
    st(safetensors("{}", [], 3)),
    /header length 3 bytes exceeds the 2 bytes after the length field/,
  );
  assert.match(st(safetensors("{}x", [], 1)), /header length 1 is too short/);
  const one = '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}';
  assert.match(
    st(safetensors(one, [0, 0, 0, 0, 9])),
    /the last tensor \(1 byte appended to the file\?\)/,
  );
  const short = '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,5]}}';
  assert.match(
    st(safetensors(short, [0, 0, 0, 0, 0])),
    /needs 4 bytes \(1 element x 4\) but data_offsets \[0, 5\] span 5/,
  );
  const past = '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}';
  assert.match(
    st(safetensors(past, [0])),
    /end past the data section \(1 byte; file truncated\?\)/,
  );

  const idx = (bytes: number[]) => messageOf(() => decodeIdx(Uint8Array.from(bytes), "x.idx"));
  assert.match(idx([0]), /^x\.idx: truncated header: 1 byte, expected at least 4/);
  assert.match(idx([0, 0, 0x08, 0]), /\(1 byte each\) need 1 data byte, but the file has 0/);

  const cifar = messageOf(() => decodeCifar10(new Uint8Array(3074), "b.bin"));
  assert.match(
    cifar,
    /^b\.bin: 3074 bytes is not a multiple of the 3073-byte record \(1 record and 1 extra byte; truncated\?\)/,
  );
});
