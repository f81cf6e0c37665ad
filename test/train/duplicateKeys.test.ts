import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { WordTokenizer } from "../../src/data/text/tokenizer.ts";
import { encodeSafetensors } from "../../src/io/safetensors.ts";
import { parseModelConfig } from "../../src/nn/config.ts";
import { TextClassifier } from "../../src/nn/textClassifier.ts";
import { loadRun } from "../../src/report/load.ts";
import { InputError } from "../../src/util/errors.ts";
import { CheckpointError, loadCheckpoint } from "../../src/train/checkpoint.ts";
import { train } from "../../src/train/trainer.ts";
import { FIXTURES } from "../report/helpers.ts";
import { digits, QUIET, tempDir, TINY } from "./helpers.ts";
import { tinyText } from "../helpers/tinyText.ts";

// Every JSON file of a checkpoint (and the safetensors headers) is refused when an object in
// it names a key twice: JSON.parse would keep the last value without a word.

await useBackend("wasm");

const FILES = ["config.json", "model.safetensors", "optimizer.safetensors", "train_state.json"];

/** `"key": value,` repeated right after the first `{` of a JSON text (the second one wins in JSON.parse). */
function withDuplicate(text: string, key: string, value: unknown, pattern = "{"): string {
  const at = text.indexOf(pattern) + pattern.length;
  return `${text.slice(0, at)}${JSON.stringify(key)}: ${JSON.stringify(value)}, ${text.slice(at)}`;
}

async function refused(dir: string, pattern: RegExp): Promise<void> {
  await assert.rejects(loadCheckpoint(dir), (e: unknown) => {
    assert.ok(e instanceof CheckpointError && e instanceof InputError, String(e));
    assert.match(e.message, pattern);
    assert.ok(!e.message.includes("\n"), e.message);
    return true;
  });
}

const TINY_TEXT = tinyText({ vocabSize: 40 });

test("checkpoint JSON files and safetensors headers that name a key twice are refused, naming the file and the key", async () => {
  const good = tempDir();
  const r = await train({
    ...QUIET,
    dataset: await digits(64, 16),
    model: TINY,
    epochs: 1,
    batchSize: 32,
    seed: 1,
    out: good,
  });
  r.model.dispose();
  const copy = () => {
    const d = tempDir();
    for (const f of FILES) copyFileSync(join(good, f), join(d, f));
    return d;
  };
  const read = (f: string) => readFileSync(join(good, f), "utf8");

  let d = copy();
  writeFileSync(join(d, "config.json"), withDuplicate(read("config.json"), "dModel", 32));
  await refused(
    d,
    /^checkpoint .*: config\.json: duplicate key "dModel" in the object at \$ \(line \d+, column \d+; first at line 1, column 2\)/,
  );

  d = copy();
  writeFileSync(join(d, "train_state.json"), withDuplicate(read("train_state.json"), "step", 0));
  await refused(d, /: train_state\.json: duplicate key "step" in the object at \$ /);

  // Nested: inside train_state.json's data object.
  d = copy();
  writeFileSync(
    join(d, "train_state.json"),
    withDuplicate(read("train_state.json"), "spec", "mnist", '"data": {'),
  );
  await refused(d, /: train_state\.json: duplicate key "spec" in the object at \$\.data /);

  // model.safetensors: the first tensor listed again, pointing at zeros appended to the data.
  d = copy();
  const bytes = readFileSync(join(good, "model.safetensors"));
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString("utf8")) as Record<
    string,
    { shape: number[]; data_offsets: number[] }
  >;
  const [name] = Object.keys(header).filter((k) => k !== "__metadata__");
  const {
    shape,
    data_offsets: [begin, end],
  } = header[name];
  const dataLength = bytes.length - 8 - n;
  const text = withDuplicate(JSON.stringify(header), name, {
    dtype: "F32",
    shape,
    data_offsets: [dataLength, dataLength + end - begin],
  });
  const json = Buffer.from(text, "utf8");
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(
    join(d, "model.safetensors"),
    Buffer.concat([length, json, bytes.subarray(8 + n), Buffer.alloc(end - begin)]),
  );
  await refused(
    d,
    new RegExp(
      `: model\\.safetensors: header: duplicate key "${name.replace(/\./g, "\\.")}" in the object at \\$ `,
    ),
  );

  // The commit journal.
  d = copy();
  writeFileSync(join(d, "checkpoint.commit.json"), '{"files": [], "files": ["config.json"]}');
  await refused(
    d,
    /checkpoint\.commit\.json: duplicate key "files" .*; remove it to keep the previous checkpoint/,
  );

  // tokenizer.json of a text checkpoint (assembled from the image one's train_state.json).
  const text1 = copy();
  const model = new TextClassifier(TINY_TEXT, 1);
  const state = JSON.parse(read("train_state.json")) as { step: number; epoch: number; data: { fingerprints?: unknown } };
  // The image run's training-input fingerprints are pixels, not a text model's: assemble the
  // text checkpoint as one without them.
  delete state.data.fingerprints;
  writeFileSync(join(text1, "train_state.json"), JSON.stringify(state));
  writeFileSync(join(text1, "config.json"), JSON.stringify(parseModelConfig(TINY_TEXT)));
  writeFileSync(
    join(text1, "model.safetensors"),
    encodeSafetensors(model.getWeights(), {
      format: "attnlip",
      step: String(state.step),
      epoch: String(state.epoch),
    }),
  );
  model.dispose();
  const tokenizer = JSON.stringify({
    format: "attnlip-tokenizer",
    version: 1,
    kind: "word",
    maxLength: 8,
    vocab: ["[PAD]", "[UNK]", "[CLS]", "a", "b"],
  });
  writeFileSync(join(text1, "tokenizer.json"), tokenizer);
  const loaded = await loadCheckpoint(text1); // the assembled checkpoint is sound
  assert.equal(loaded.tokenizer?.size, 5);
  loaded.model.dispose();
  writeFileSync(
    join(text1, "tokenizer.json"),
    withDuplicate(tokenizer, "vocab", ["[PAD]", "[UNK]", "[CLS]"]),
  );
  await refused(text1, /: tokenizer\.json: duplicate key "vocab" in the object at \$ /);
});

test("the report refuses an attack.json or config.json that names a key twice", async () => {
  const dir = tempDir("attnlip-report-dup-");
  copyFileSync(join(FIXTURES.minimal, "analysis.json"), join(dir, "analysis.json"));
  writeFileSync(
    join(dir, "attack.json"),
    '{"norm": "linf", "results": [{"eps": 0.1, "pgd": 0.5, "fgsm": 0.5, "pgd": 0.9}]}',
  );
  await assert.rejects(loadRun(dir), (e: unknown) => {
    assert.ok(e instanceof InputError, String(e));
    assert.match(e.message, /attack\.json: duplicate key "pgd" in the object at \$\.results\[0\] /);
    return true;
  });
});

test("a tokenizer.json vocabulary listing a token twice is refused, naming the token and both ids", () => {
  assert.throws(
    () =>
      WordTokenizer.fromJSON({
        format: "attnlip-tokenizer",
        version: 1,
        kind: "word",
        maxLength: 8,
        vocab: ["[PAD]", "[UNK]", "[CLS]", "a", "b", "a"],
      }),
    (e: unknown) =>
      e instanceof InputError &&
      /^tokenizer: the vocabulary has duplicate tokens: "a" is id 3 and id 5$/.test(e.message),
  );
});
