import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeSafetensors, SafetensorsError } from "../../src/io/safetensors.ts";
import { DuplicateKeyError, parseJsonStrict } from "../../src/io/strictJson.ts";
import { ConfigError, parseModelConfig } from "../../src/nn/config.ts";

// A JSON object that names a key twice is refused wherever attnlip reads JSON from a user's
// file: JSON.parse keeps the last value silently, which once loaded a duplicated W_Q entry
// pointing at zeros.

test("parseJsonStrict returns JSON.parse's value and refuses a key named twice at any depth", () => {
  for (const text of [
    '{"a": 1, "b": {"a": 2}}',
    "[1, 2.5e3, null]",
    '"x"',
    '{"__proto__": {"x": 1}}',
    '[{"k": 1}, {"k": 2}]',
  ])
    assert.deepEqual(parseJsonStrict(text), JSON.parse(text), text);
  const cases: [string, string, string, RegExp][] = [
    ['{"W_Q": 1, "W_Q": 2}', "W_Q", "$", /line 1, column 12; first at line 1, column 2/],
    [
      '{\n  "a": {"x": [{"k": 1, "k": 2}]}\n}',
      "k",
      "$.a.x[0]",
      /line 2, column 24; first at line 2, column 16/,
    ],
    ['{"a": 1, "\\u0061": 2}', "a", "$", /column 10/], // the same key once unescaped
    ['{"odd key": {"b": 1, "b": 1}}', "b", '$["odd key"]', /first at line 1, column 14/],
  ];
  for (const [text, key, path, where] of cases)
    assert.throws(
      () => parseJsonStrict(text),
      (e: unknown) => {
        assert.ok(e instanceof DuplicateKeyError && e instanceof SyntaxError, String(e));
        assert.equal(e.key, key);
        assert.equal(e.path, path);
        assert.match(
          e.message,
          new RegExp(
            `^duplicate key ${JSON.stringify(key)} in the object at ${path.replace(/[$.[\]]/g, "\\$&")} `,
          ),
        );
        assert.match(e.message, where);
        return true;
      },
      text,
    );
  // Not JSON: JSON.parse's own SyntaxError (comments and trailing commas are not JSON either).
  for (const text of ['{"a": 1,}', '{"a": 1 /* c */}', "{", ""])
    assert.throws(
      () => parseJsonStrict(text),
      (e: unknown) => e instanceof SyntaxError && !(e instanceof DuplicateKeyError),
      text,
    );
});

/** A safetensors file from raw header text and data bytes. */
function safetensors(header: string, data: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

test("a safetensors header naming a tensor twice is refused, with the file and the key", () => {
  // W_Q's first entry holds 1.0; the second points at zeros (JSON.parse would load the zeros).
  const data = new Uint8Array(new Float32Array([1, 0]).buffer);
  const entry = (begin: number) =>
    `{"dtype": "F32", "shape": [1], "data_offsets": [${begin}, ${begin + 4}]}`;
  const bytes = safetensors(`{"W_Q": ${entry(0)}, "W_Q": ${entry(4)}}`, data);
  assert.throws(
    () => decodeSafetensors(bytes, { name: "model.safetensors" }),
    (e: unknown) => {
      assert.ok(e instanceof SafetensorsError, String(e));
      assert.match(
        e.message,
        /^model\.safetensors: header: duplicate key "W_Q" in the object at \$ /,
      );
      return true;
    },
  );
  // Also inside __metadata__.
  const meta = safetensors(
    `{"__metadata__": {"step": "1", "step": "2"}, "W_Q": ${entry(0)}}`,
    data.subarray(0, 4),
  );
  assert.throws(
    () => decodeSafetensors(meta, { name: "m.safetensors" }),
    /^SafetensorsError: m\.safetensors: header: duplicate key "step" in the object at \$\.__metadata__/,
  );
  // The same file without the duplicate loads.
  const fine = decodeSafetensors(safetensors(`{"W_Q": ${entry(0)}}`, data.subarray(0, 4)));
  assert.deepEqual(Array.from(fine.tensors.get("W_Q")!.data), [1]);
});

test("a model config given as JSON text with a key twice is refused, naming the key", () => {
  assert.throws(
    () => parseModelConfig('{"kind": "vit", "dModel": 16, "dModel": 32}'),
    (e: unknown) =>
      e instanceof ConfigError &&
      /^model config: duplicate key "dModel" in the object at \$ /.test(e.message),
  );
});
