import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, modelPreset, parseModelConfig, PRESET_NAMES } from "../../src/nn/index.ts";

test("vit-tiny preset has the documented values", () => {
  const c = modelPreset("vit-tiny");
  assert.deepEqual(c, {
    kind: "vit",
    imageSize: 28,
    channels: 1,
    patchSize: 4,
    dModel: 64,
    heads: 4,
    blocks: 4,
    mlpHidden: 128,
    classes: 10,
    qkvBias: true,
    norm: "pre",
    lnEps: 1e-5,
    activation: "gelu-tanh",
    dropout: 0,
  });
});

test("the MLP activation is gelu-tanh unless the config says gelu-erf; other names are refused", () => {
  const base = { kind: "vit", imageSize: 28, channels: 1, patchSize: 7, dModel: 16, heads: 2, blocks: 1, mlpHidden: 32, classes: 10 } as const;
  assert.equal(parseModelConfig(base).activation, "gelu-tanh");
  assert.equal(parseModelConfig({ ...base, activation: "gelu-erf" }).activation, "gelu-erf");
  assert.throws(() => parseModelConfig({ ...base, activation: "relu" } as never), (e: Error) => e instanceof ConfigError && /activation/.test(e.message));
});

test("text-tiny preset has the documented values and defaults", () => {
  const c = modelPreset("text-tiny");
  assert.equal(c.kind, "text");
  if (c.kind !== "text") return;
  assert.equal(c.vocabSize, 8000);
  assert.equal(c.maxLength, 128);
  assert.equal(c.dModel, 64);
  assert.equal(c.heads, 4);
  assert.equal(c.blocks, 2);
  assert.equal(c.mlpHidden, 128);
  assert.equal(c.classes, 2);
  assert.equal(c.pooling, "cls");
  assert.equal(c.causal, false);
  assert.equal(c.norm, "pre");
});

test("unknown preset lists the known ones", () => {
  assert.throws(
    () => modelPreset("vit-huge"),
    (e: Error) => {
      assert.ok(e instanceof ConfigError);
      for (const name of PRESET_NAMES) assert.match(e.message, new RegExp(name));
      return true;
    },
  );
});

test("defaults are filled and JSON strings accepted", () => {
  const c = parseModelConfig(
    JSON.stringify({
      kind: "vit",
      imageSize: 8,
      channels: 3,
      patchSize: 2,
      dModel: 8,
      heads: 2,
      blocks: 1,
      mlpHidden: 16,
      classes: 3,
    }),
  );
  assert.equal(c.norm, "pre");
  assert.equal(c.qkvBias, true);
  assert.equal(c.lnEps, 1e-5);
});

test("validation errors name the field", () => {
  const base = { ...modelPreset("vit-tiny") };
  const cases: [unknown, RegExp][] = [
    [{ ...base, heads: 3 }, /dModel: must be divisible by heads/],
    [{ ...base, patchSize: 5 }, /imageSize: must be divisible by patchSize/],
    [{ ...base, dModel: -4 }, /dModel/],
    [{ ...base, blocks: 1.5 }, /blocks/],
    [{ ...base, norm: "middle" }, /norm/],
    [{ ...base, classes: 1 }, /classes/],
    [{ ...base, extra: 1 }, /extra/],
    [{ ...base, kind: "audio" }, /kind/],
    [{ ...modelPreset("text-tiny"), pooling: "max" }, /pooling/],
    [{ kind: "text", dModel: 8 }, /vocabSize/],
    // Absent fields named together, a wrong one on its own.
    [
      { kind: "vit", imageSize: "x", classes: 10 },
      /^model config: missing channels, patchSize, dModel, heads, blocks, mlpHidden; imageSize: Invalid input: expected number, received string$/,
    ],
    ["{not json", /not valid JSON/],
    // A JSON literal beyond float64 (1e999) reads as Infinity: named as such, not "received Infinity".
    [
      `{ "kind": "vit", "imageSize": 28, "channels": 1, "patchSize": 7, "dModel": 1e999, "heads": 2, "blocks": 1, "mlpHidden": 8, "classes": 10 }`,
      /^model config: dModel: expected a finite number, got Infinity \(a JSON number beyond about 1\.8e308 reads as Infinity\)$/,
    ],
  ];
  for (const [input, pattern] of cases)
    assert.throws(
      () => parseModelConfig(input),
      (e: Error) => e instanceof ConfigError && pattern.test(e.message),
      String(pattern),
    );
});
