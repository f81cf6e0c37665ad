// --encoding on the commands that read text files, and the encoding recorded in a checkpoint
// so that resume, analyze and attack read the same file the same way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { InputError } from "../../src/util/errors.ts";
import { parseAttackFlags } from "../../src/cli/attackCommand.ts";
import { parseTrainFlags } from "../../src/cli/trainCommand.ts";
import { runAnalyze } from "../../src/pipelines/analyzeRun.ts";
import { runAttack } from "../../src/pipelines/attackRun.ts";
import { train } from "../../src/train/trainer.ts";
import { QUIET, tempDir } from "../train/helpers.ts";
import { tinyText, wordPair } from "../helpers/tinyText.ts";

await useBackend("wasm");

const TINY_TEXT = tinyText({ vocabSize: 100, maxLength: 12 });

test("--encoding is checked by train and attack (unknown name; files only; fixed by a checkpoint)", () => {
  assert.throws(
    () => parseTrainFlags({ data: "csv:x.csv", encoding: "klingon", out: "o" }),
    (e: Error) =>
      e instanceof InputError &&
      /^train: --encoding: unknown encoding "klingon": expected auto/.test(e.message),
  );
  assert.equal(
    parseTrainFlags({ data: "jsonl:x.jsonl", encoding: "latin1", out: "o" }).encoding,
    "latin1",
  );
  assert.throws(
    () => parseTrainFlags({ data: "spam", encoding: "utf-8", out: "o" }),
    /--text-column, --label-column and --encoding apply to --data csv:FILE or jsonl:FILE only/,
  );
  assert.throws(
    () => parseTrainFlags({ resume: "o", encoding: "utf-8" }),
    /--encoding cannot be given with --resume/,
  );
  assert.throws(
    () => parseAttackFlags({ encoding: "klingon" }),
    /--encoding: unknown encoding "klingon"/,
  );
});

test("a UTF-16 CSV trained with --encoding utf-16le: the checkpoint records it; resume, analyze and attack reuse it", async () => {
  const dir = tempDir("attnlip-text-encoding-");
  const rows = ["text,label"];
  for (let i = 0; i < 40; i++)
    rows.push(i % 4 === 0 ? `gewinn jetzt € ${wordPair(i)},spam` : `grüße zum treffen ${wordPair(i)},ham`);
  const csv = join(dir, "mail-utf16.csv");
  // With its byte-order mark; "auto" reads it too (next test), --encoding says so explicitly.
  writeFileSync(
    csv,
    Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(rows.join("\r\n") + "\r\n", "utf16le")]),
  );
  const out = join(dir, "run");
  const r = await train({
    ...QUIET,
    data: `csv:${csv}`,
    encoding: "utf-16le",
    model: JSON.stringify(TINY_TEXT),
    epochs: 2,
    stopAfterEpoch: 1,
    batchSize: 8,
    out,
  });
  r.model.dispose();
  const state = JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
  assert.equal(state.data.encoding, "utf-16le");
  const tokenizer = JSON.parse(readFileSync(join(out, "tokenizer.json"), "utf8"));
  assert.ok(tokenizer.vocab.includes("grüße"), "decoded as UTF-16");
  const resumed = await train({ ...QUIET, resume: out });
  assert.equal(resumed.trainState.epoch, 2);
  resumed.model.dispose();
  const analysis = await runAnalyze({
    checkpoint: out,
    model: "text-tiny",
    seed: 0,
    n: 2,
    backend: "wasm",
    mlp: "relaxed",
    headTruth: false,
    blockTruth: false,
    iterations: 3,
    print: false,
  });
  assert.equal(analysis.split.origin, "checkpoint");
  const attack = await runAttack({
    checkpoint: out,
    n: 2,
    eps: [0],
    attacks: ["fgsm"],
    out: join(dir, "attack.json"),
  });
  assert.equal(attack.n, 2);
});

// Issue: a UTF-16 file with a byte-order mark but no --encoding failed with "line 2: not valid
// CSV (Invalid Opening Quote ... "\u0000")". The automatic encoding now honours FF FE / FE FF;
// without a mark, a file that is half NUL bytes is an error suggesting the encoding.
test("auto reads UTF-16 after its byte-order mark (LE and BE); UTF-16 without one is an error naming --encoding", async () => {
  const { readCsvTexts } = await import("../../src/data/text/files.ts");
  const dir = tempDir("attnlip-text-utf16-");
  const text = "text,label\r\n\"grüße, € 5\",ham\r\nwin now,spam\r\n";
  const cases = [
    ["le.csv", Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, "utf16le")])],
    ["be.csv", Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, "utf16le").swap16()])],
  ] as const;
  for (const [name, bytes] of cases) {
    writeFileSync(join(dir, name), bytes);
    const r = readCsvTexts(join(dir, name));
    assert.deepEqual(r.texts, ["grüße, € 5", "win now"], name);
    assert.deepEqual(r.labels, ["ham", "spam"], name);
    assert.deepEqual(r.lines, [2, 3], name);
  }
  for (const [name, bytes, hint] of [
    ["le-nobom.csv", Buffer.from(text, "utf16le"), "utf-16le"],
    ["be-nobom.csv", Buffer.from(text, "utf16le").swap16(), "utf-16be"],
  ] as const) {
    writeFileSync(join(dir, name), bytes);
    assert.throws(
      () => readCsvTexts(join(dir, name)),
      (e: Error) =>
        e instanceof InputError &&
        e.message ===
          `${join(dir, name)}: ${bytes.filter((b) => b === 0).length} of its ${bytes.length} bytes are NUL: UTF-16 text without a byte-order mark? give its encoding, e.g. --encoding ${hint}`,
    );
    // With the encoding given, it reads.
    assert.deepEqual(readCsvTexts(join(dir, name), { encoding: hint }).texts, ["grüße, € 5", "win now"]);
  }
});
