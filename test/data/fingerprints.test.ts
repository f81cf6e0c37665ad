// Issue 9's last gap: the training rows of a checkpoint in another file (re-sorted, one row
// appended, the same rows as JSONL, the same images in another IDX folder) were taken for
// "other data", and most of its "test" split were training examples (20 of 24 for a re-sorted
// CSV). A checkpoint now records the fingerprints of its training inputs (fingerprints.json),
// and every evaluation leaves out a test example whose input is one of them, whatever file it
// comes from; the trainer leaves duplicates out of its test accuracy the same way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { useBackend } from "../../src/backend.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import { imageEvaluationSplit, textEvaluationSplit, trainedData } from "../../src/data/evaluationInputs.ts";
import {
  decodeFingerprints,
  encodeFingerprints,
  heldOutPositions,
  inputFingerprints,
} from "../../src/data/fingerprints.ts";
import { describeSplit } from "../../src/data/heldOut.ts";
import { loadTextDataset } from "../../src/data/text/dataset.ts";
import { CheckpointError, loadCheckpoint } from "../../src/train/checkpoint.ts";
import { train } from "../../src/train/trainer.ts";
import { tinyText, wordPair } from "../helpers/tinyText.ts";
import { QUIET, tempDir } from "../train/helpers.ts";

await useBackend("wasm");
const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));

/** 80 distinct reviews as [text, label] rows (every word frequent enough for the vocabulary). */
function reviewRows(): [string, string][] {
  const rows: [string, string][] = [];
  for (let i = 0; i < 80; i++) rows.push(i % 2 === 0 ? [`hate it ${wordPair(i)}`, "neg"] : [`love it ${wordPair(i)}`, "pos"]);
  return rows;
}
const csv = (rows: [string, string][]) => ["text,label", ...rows.map(([t, l]) => `${t},${l}`)].join("\n") + "\n";
const jsonl = (rows: [string, string][]) => rows.map(([text, label]) => JSON.stringify({ text, label })).join("\n") + "\n";

test("inputFingerprints: equal inputs give equal fingerprints, padding and other inputs do not matter; the file form round-trips", () => {
  const split = {
    ids: Int32Array.from([1, 5, 6, 0, 1, 5, 6, 0, 1, 5, 7, 0, 1, 5, 6, 9]),
    lengths: Int32Array.from([3, 3, 3, 4]),
    labels: Int32Array.from([0, 1, 0, 0]),
    count: 4,
    length: 4,
    indices: Int32Array.from([0, 1, 2, 3]),
  };
  const fps = inputFingerprints(split);
  assert.equal(fps[0], fps[1], "same ids, other label: the same input");
  assert.notEqual(fps[0], fps[2]);
  assert.notEqual(fps[0], fps[3], "a longer row is another input");
  assert.match(fps[0], /^[0-9a-f]{16}$/);
  const images = {
    images: Float32Array.from([0, 0.5, 1, 0.25, 0, 0.5, 1, 0.25, 0, 0.5, 1, 0.75]),
    labels: Int32Array.from([0, 1, 2]),
    count: 3,
    shape: [2, 2, 1] as [number, number, number],
    indices: Int32Array.from([0, 1, 2]),
  };
  const ifp = inputFingerprints(images);
  assert.equal(ifp[0], ifp[1]);
  assert.notEqual(ifp[0], ifp[2]);
  const parts = heldOutPositions(images, new Set([ifp[0]]));
  assert.deepEqual(parts, { kept: [2], seen: [0, 1] });
  assert.deepEqual(heldOutPositions(images, null), { kept: [0, 1, 2], seen: [] });

  const set = new Set(fps);
  assert.deepEqual(decodeFingerprints(encodeFingerprints(set), set.size), set);
  assert.throws(() => decodeFingerprints(encodeFingerprints(set), set.size + 1), /fingerprints: 24 bytes, expected 32/);
  assert.throws(() => decodeFingerprints("not base64!", 1), /not base64/);
});

test("a text checkpoint's training rows are left out of a re-sorted copy, a copy with a row appended and a JSONL copy", async () => {
  const dir = tempDir("attnlip-fingerprints-");
  const rows = reviewRows();
  const file = join(dir, "d.csv");
  writeFileSync(file, csv(rows));
  const out = join(dir, "run");
  const r = await train({ ...QUIET, data: `csv:${file}`, model: tinyText({ vocabSize: 64 }), epochs: 1, batchSize: 16, seed: 5, out });
  r.model.dispose();
  const ckpt = await loadCheckpoint(out);
  ckpt.model.dispose();
  assert.ok(ckpt.trainingInputs !== null);
  assert.equal(ckpt.trainingInputs.input, "int32-token-ids");
  assert.equal(ckpt.trainingInputs.fingerprints.size, 64);
  const own = await loadTextDataset(`csv:${file}`, { seed: 5, tokenizer: ckpt.tokenizer! });
  const trainingTexts = new Set(Array.from(own.train.indices, (i) => rows[i][0]));
  const trained = trainedData(ckpt);

  const copies: [string, [string, string][], string][] = [
    ["re-sorted", [...rows].sort((a, b) => a[0].localeCompare(b[0])), "csv"],
    ["appended", [...rows, ["love it a brand new review", "pos"]], "csv"],
    ["jsonl", rows, "jsonl"],
  ];
  for (const [name, copyRows, kind] of copies) {
    const path = join(dir, `${name}.${kind}`);
    writeFileSync(path, kind === "csv" ? csv(copyRows) : jsonl(copyRows));
    const chosen = await textEvaluationSplit(
      { who: "analyze", data: `${kind}:${path}`, trained, seed: 0, n: 100 },
      { classes: 2, tokenizer: ckpt.tokenizer!, labelNames: ckpt.trainState.data.labels },
    );
    assert.equal(chosen.info.origin, "other-data", name);
    assert.equal(chosen.info.inputsChecked, true, name);
    const evaluated = chosen.info.indices.map((i) => copyRows[i][0]);
    const leaked = evaluated.filter((t) => trainingTexts.has(t));
    assert.deepEqual(leaked, [], `${name}: training texts evaluated`);
    // The test split of the copy (seed 0) holds training rows; exactly those are left out.
    const copy = await loadTextDataset(`${kind}:${path}`, { seed: 0, tokenizer: ckpt.tokenizer!, labelNames: ["neg", "pos"] });
    const inTest = Array.from(copy.test.indices, (i) => copyRows[i][0]).filter((t) => trainingTexts.has(t)).length;
    assert.ok(inTest > 0, `${name}: the copy's test split should hold training rows`);
    assert.equal(chosen.info.leftOut, inTest, name);
    assert.equal(chosen.info.evaluated, copy.test.count - inTest, name);
    assert.match(describeSplit(chosen.info), new RegExp(`; ${inTest} test examples? of the split whose input equals a training input (is|are) left out before the first are chosen$`));
  }

  // The CLI says so; a copy holding nothing but training rows is refused (exit 2, one line).
  const trainOnly = join(dir, "train-only.csv");
  writeFileSync(trainOnly, csv(rows.filter(([t]) => trainingTexts.has(t))));
  const cli = (data: string) =>
    spawnSync(process.execPath, [bin, "analyze", out, "--data", data, "--n", "40", "--no-head-truth", "--no-block-truth", "--out", join(dir, "analysis"), "--force"], { encoding: "utf8" });
  const ok = cli(`csv:${join(dir, "re-sorted.csv")}`);
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /data: test split of csv:.*re-sorted\.csv \(not the checkpoint's training data.*\); evaluating the first \d+ held out \(digest of their indices: sha256:[0-9a-f]{16}\); \d+ test examples of the split whose input equals a training input are left out before the first are chosen/);
  const analysis = JSON.parse(readFileSync(join(dir, "analysis", "analysis.json"), "utf8"));
  assert.ok(analysis.split.leftOut > 0);
  const refused = cli(`csv:${trainOnly}`);
  assert.equal(refused.status, 2, refused.stderr);
  assert.deepEqual(refused.stderr.trim().split("\n").length, 1);
  assert.match(refused.stderr, /every one of the \d+ test examples of csv:.*train-only\.csv has the same input as a training example of this checkpoint; nothing held out to evaluate/);

  // An older checkpoint (no fingerprints.json, nothing recorded about it) cannot recognise the copy, and says so.
  rmSync(join(out, "fingerprints.json"));
  const olderState = JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
  delete olderState.data.fingerprints;
  writeFileSync(join(out, "train_state.json"), JSON.stringify(olderState));
  const older = await loadCheckpoint(out);
  older.model.dispose();
  assert.equal(older.trainingInputs, null);
  const unchecked = await textEvaluationSplit(
    { who: "analyze", data: `csv:${join(dir, "re-sorted.csv")}`, trained: trainedData(older), seed: 0, n: 100 },
    { classes: 2, tokenizer: older.tokenizer!, labelNames: ["neg", "pos"] },
  );
  assert.equal(unchecked.info.inputsChecked, false);
  assert.equal(unchecked.info.leftOut, 0);
  assert.match(describeSplit(unchecked.info), /records no training fingerprints, so a copy of its training inputs in this data is not recognised/);
});

/** An IDX file: magic 00 00 08, the number of dims, dims big-endian, then the bytes. */
function idx(dims: number[], data: ArrayLike<number>): Buffer {
  const header = Buffer.alloc(4 + 4 * dims.length);
  header.writeUInt8(8, 2);
  header.writeUInt8(dims.length, 3);
  dims.forEach((d, i) => header.writeUInt32BE(d, 4 + 4 * i));
  return Buffer.concat([header, Buffer.from(Uint8Array.from(data))]);
}

function writeIdx(dir: string, train: Uint8Array[], trainLabels: number[], test: Uint8Array[], testLabels: number[]): void {
  mkdirSync(dir, { recursive: true });
  const flat = (images: Uint8Array[]) => images.flatMap((im) => Array.from(im));
  writeFileSync(join(dir, "train-images-idx3-ubyte"), idx([train.length, 28, 28], flat(train)));
  writeFileSync(join(dir, "train-labels-idx1-ubyte"), idx([train.length], trainLabels));
  writeFileSync(join(dir, "t10k-images-idx3-ubyte"), idx([test.length, 28, 28], flat(test)));
  writeFileSync(join(dir, "t10k-labels-idx1-ubyte"), idx([test.length], testLabels));
}

test("an image checkpoint's training images in another IDX folder are left out of its evaluation", async () => {
  const dir = tempDir("attnlip-fingerprints-img-");
  let s = 7;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2 ** 31), s);
  const image = () => Uint8Array.from({ length: 784 }, () => rand() % 256);
  const trainImages = Array.from({ length: 40 }, image);
  const testImages = Array.from({ length: 20 }, image);
  const labels = (n: number) => Array.from({ length: n }, (_, i) => i % 10);
  writeIdx(join(dir, "a"), trainImages, labels(40), testImages, labels(20));
  const out = join(dir, "run");
  const r = await train({ ...QUIET, data: `idx:${join(dir, "a")}`, model: "vit-micro", epochs: 1, batchSize: 20, out });
  r.model.dispose();
  const ckpt = await loadCheckpoint(out);
  ckpt.model.dispose();
  assert.equal(ckpt.trainingInputs?.input, "float32-pixels");
  assert.equal(ckpt.trainingInputs?.fingerprints.size, 40);

  // Folder b: its test file holds 10 of a's training images between 10 of a's test images.
  const mixed = [...testImages.slice(0, 5), ...trainImages.slice(0, 10), ...testImages.slice(5, 10)];
  writeIdx(join(dir, "b"), testImages.slice(10), labels(10), mixed, labels(20));
  const chosen = await imageEvaluationSplit({ who: "attack", data: `idx:${join(dir, "b")}`, trained: trainedData(ckpt), seed: 0, n: 100 });
  assert.equal(chosen.info.origin, "other-data");
  assert.equal(chosen.info.leftOut, 10);
  assert.equal(chosen.info.evaluated, 10);
  // Indices of b: its training file's 10 records first, then its test file's (positions 10..29).
  assert.deepEqual(chosen.info.indices, [10, 11, 12, 13, 14, 25, 26, 27, 28, 29]);
  const b = await loadDataset(`idx:${join(dir, "b")}`);
  const trainingFps = new Set(inputFingerprints((await loadDataset(`idx:${join(dir, "a")}`)).train));
  assert.ok(inputFingerprints(chosen.split).every((fp) => !trainingFps.has(fp)));
  assert.equal(inputFingerprints(b.test).filter((fp) => trainingFps.has(fp)).length, 10);
});

test("the trainer leaves test examples whose input is a training input out of its test accuracy, and records how many", async () => {
  const dir = tempDir("attnlip-fingerprints-train-");
  // Each text twice: a seeded split puts some copies in the test split.
  const rows = reviewRows().slice(0, 40);
  const file = join(dir, "dup.csv");
  writeFileSync(file, csv([...rows, ...rows]));
  const lines: string[] = [];
  const out = join(dir, "run");
  const r = await train({ ...QUIET, log: (l) => lines.push(l), data: `csv:${file}`, model: tinyText({ vocabSize: 64 }), epochs: 1, batchSize: 16, seed: 3, out });
  r.model.dispose();
  const state = JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
  const data = await loadTextDataset(`csv:${file}`, { seed: 3 });
  const trainTexts = new Set(Array.from(data.train.indices, (i) => i % 40));
  const dupes = Array.from(data.test.indices).filter((i) => trainTexts.has(i % 40)).length;
  assert.ok(dupes > 0);
  assert.equal(state.data.testCount, 16);
  assert.equal(state.data.testLeftOut, dupes);
  assert.ok(lines.some((l) => l === `held-out test: ${dupes} of 16 test examples have the same input as a training example (duplicates in the data) and are left out of the test accuracy`), lines.join("\n"));
  // Resume rebuilds the same held-out test split.
  const resumed = await train({ ...QUIET, resume: out, epochs: 2 });
  resumed.model.dispose();
  assert.equal(JSON.parse(readFileSync(join(out, "train_state.json"), "utf8")).data.testLeftOut, dupes);
});

test("a malformed fingerprints.json is refused, naming the file and what is wrong", async () => {
  const dir = tempDir("attnlip-fingerprints-bad-");
  const file = join(dir, "d.csv");
  writeFileSync(file, csv(reviewRows()));
  const out = join(dir, "run");
  const r = await train({ ...QUIET, data: `csv:${file}`, model: tinyText({ vocabSize: 64 }), epochs: 1, batchSize: 32, out });
  r.model.dispose();
  const path = join(out, "fingerprints.json");
  const good = JSON.parse(readFileSync(path, "utf8"));
  const bytes = Buffer.from(good.fingerprints, "base64");
  const zeros = Buffer.alloc(bytes.length).toString("base64");
  const duplicated = Buffer.concat([bytes.subarray(0, 8), bytes.subarray(0, 8), bytes.subarray(16)]).toString("base64");
  const state = JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
  assert.deepEqual(state.data.fingerprints.count, 64);
  assert.match(state.data.fingerprints.digest, /^sha256:[0-9a-f]{16}$/);
  for (const [edit, pattern] of [
    [{ ...good, count: good.count + 1 }, /fingerprints\.json: fingerprints: 512 bytes, expected 520/],
    [{ ...good, input: "float32-pixels" }, /fingerprints\.json: input "float32-pixels", a text model's training inputs are "int32-token-ids"/],
    [{ ...good, hash: "md5" }, /fingerprints\.json: hash: /],
    // Found by a newcomer: each of these was accepted, and training rows were evaluated.
    [{ ...good, count: 0, fingerprints: "" }, /fingerprints\.json: count: /],
    [{ ...good, fingerprints: zeros }, /fingerprints: not sorted and distinct at fingerprint 2/],
    [{ ...good, fingerprints: duplicated }, /fingerprints: not sorted and distinct at fingerprint 2/],
    [{ ...good, fingerprints: good.fingerprints.replace(/=+$/, "") + (good.fingerprints.endsWith("=") ? "" : "A") }, /fingerprints: (not canonical base64|\d+ bytes, expected)/],
  ] as const) {
    writeFileSync(path, JSON.stringify(edit));
    await assert.rejects(loadCheckpoint(out), (e: unknown) => {
      assert.ok(e instanceof CheckpointError);
      assert.match((e as Error).message, pattern);
      return true;
    });
  }
  // Fingerprints that are valid but not the ones recorded at training (another run's), and a
  // file removed from a checkpoint that records it, are refused too.
  const other = [...bytes.subarray(8)]; // drop the first fingerprint: sorted, distinct, 63 of them
  writeFileSync(path, JSON.stringify({ ...good, count: 63, fingerprints: Buffer.from(other).toString("base64") }));
  await assert.rejects(loadCheckpoint(out), /fingerprints\.json holds 63 fingerprints \(sha256:[0-9a-f]{16}\), train_state\.json records 64 \(sha256:[0-9a-f]{16}\); edited or mixed checkpoint files/);
  rmSync(path);
  await assert.rejects(loadCheckpoint(out), /missing fingerprints\.json \(train_state\.json records 64 training-input fingerprints/);
});
