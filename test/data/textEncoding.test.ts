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
import { runAnalyze } from "../../src/cli/analyzeRun.ts";
import { runAttack } from "../../src/cli/attackRun.ts";
import { train } from "../../src/train/trainer.ts";
import { QUIET, tempDir } from "../train/helpers.ts";

await useBackend("wasm");

const TINY_TEXT = {
  kind: "text",
  vocabSize: 100,
  maxLength: 12,
  dModel: 8,
  heads: 2,
  blocks: 1,
  mlpHidden: 16,
  classes: 2,
  pooling: "cls",
} as const;

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
    rows.push(i % 4 === 0 ? `gewinn jetzt € ${i},spam` : `grüße zum treffen ${i},ham`);
  const csv = join(dir, "mail-utf16.csv");
  // Read as "auto" this file is not UTF-8, so it would be Windows-1252 nonsense with no "text" column.
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
  await assert.rejects(
    train({ ...QUIET, data: `csv:${csv}`, model: JSON.stringify(TINY_TEXT), epochs: 1 }),
    /mail-utf16\.csv: no column "text"/,
    "without --encoding the file does not read",
  );
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
