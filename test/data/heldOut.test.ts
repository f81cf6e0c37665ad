// Issue: analyze and attack on a checkpoint split embedded MNIST with --seed, not with the
// seed the checkpoint was trained with (415 of 2,000 "test" digits were training digits for a
// checkpoint trained with --seed 5). Every command that evaluates a checkpoint now uses the
// checkpoint's own held-out split; these tests hold that for several training seeds, on
// images and text, and check the refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { runAnalyze } from "../../src/pipelines/analyzeRun.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import { imageEvaluationSplit, textEvaluationSplit } from "../../src/data/evaluationInputs.ts";
import { checkHeldOut, indexDigest } from "../../src/data/heldOut.ts";
import { embeddedMnistDigest, loadEmbeddedMnist } from "../../src/data/mnist.ts";
import { loadTextDataset } from "../../src/data/text/dataset.ts";
import { runAttack } from "../../src/pipelines/attackRun.ts";
import { InputError } from "../../src/util/errors.ts";
import { train } from "../../src/train/trainer.ts";
import { QUIET, tempDir } from "../train/helpers.ts";
import { sha256Parts } from "../helpers/sha256Parts.ts";
import { tinyText, wordPair } from "../helpers/tinyText.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

await useBackend("wasm");

const overlap = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  const s = new Set(Array.from(a));
  return Array.from(b).filter((i) => s.has(i)).length;
};

test("embedded MNIST indices: train and test are disjoint, and another seed's test split meets this training split", () => {
  const a = loadEmbeddedMnist({ seed: 5 });
  assert.equal(overlap(a.train.indices, a.test.indices), 0);
  assert.equal(new Set(Array.from(a.train.indices)).size, 8000);
  // The old fault, as a value: the seed-0 test split holds hundreds of seed-5 training digits.
  const b = loadEmbeddedMnist({ seed: 0 });
  const shared = overlap(a.train.indices, b.test.indices);
  assert.ok(shared > 200, `expected many shared digits, got ${shared}`);
  // Every index points at a digit of its label (the package's order: all 0s, then all 1s, ...).
  const c = loadEmbeddedMnist({ seed: 0, trainSize: 10, testSize: 10 });
  assert.equal(
    indexDigest(c.train.indices),
    indexDigest(loadEmbeddedMnist({ seed: 0, trainSize: 10, testSize: 10 }).train.indices),
  );
});

test("checkHeldOut refuses an evaluated training example and a changed split, naming the command", () => {
  assert.throws(
    () => checkHeldOut("analyze", "mnist", undefined, [1, 2, 3], [4, 5], [4, 2]),
    (e: unknown) => {
      assert.ok(e instanceof InputError);
      assert.match(
        (e as Error).message,
        /^analyze: 1 of the 2 examples to evaluate were training examples .*index 2 of mnist/,
      );
      return true;
    },
  );
  assert.throws(
    () =>
      checkHeldOut(
        "attack",
        "csv:x.csv",
        { trainDigest: indexDigest([1, 2]), testDigest: indexDigest([4]) },
        [1, 3],
        [4],
        [4],
      ),
    {
      name: "InputError",
      message:
        /^attack: the training split of csv:x\.csv rebuilt from the checkpoint's seed is not the one it was trained on/,
    },
  );
  assert.throws(
    () =>
      checkHeldOut(
        "attack",
        "spam",
        { trainDigest: indexDigest([1, 3]), testDigest: indexDigest([9]) },
        [1, 3],
        [4],
        [4],
      ),
    { name: "InputError", message: /^attack: the test split of spam rebuilt/ },
  );
  // A weakened record is refused, not checked less: one digest without the other, wrong sizes.
  assert.throws(
    () => checkHeldOut("analyze", "mnist", { testDigest: indexDigest([4]) }, [1, 3], [4], [4]),
    {
      name: "InputError",
      message:
        "analyze: the checkpoint records testDigest but not trainDigest; both split digests are needed to check its held-out split (train_state.json edited?)",
    },
  );
  assert.throws(
    () => checkHeldOut("analyze", "mnist", { trainCount: 2, testCount: 5 }, [1, 3], [4], [4]),
    {
      name: "InputError",
      message:
        "analyze: the test split of mnist rebuilt from the checkpoint's seed and limits has 1 examples, train_state.json records 5; the data or the record changed since training",
    },
  );
  assert.throws(
    () => checkHeldOut("attack", "mnist", { trainCount: 7, testCount: 1 }, [1, 3], [4], [4]),
    { name: "InputError", message: /^attack: the training split of mnist rebuilt from the checkpoint's seed and limits has 2 examples, train_state.json records 7;/ },
  );
  checkHeldOut(
    "analyze",
    "mnist",
    { trainDigest: indexDigest([1, 3]), testDigest: indexDigest([4, 5]) },
    [1, 3],
    [4, 5],
    [5],
  );
});

test("image checkpoints trained with seeds 1, 5 and 7: analyze and attack evaluate only held-out digits, and say so", async () => {
  for (const seed of [1, 5, 7]) {
    const out = join(tempDir(), `ckpt-${seed}`);
    await train({
      data: "mnist",
      model: "vit-micro",
      epochs: 1,
      limit: 48,
      testLimit: 300,
      batchSize: 16,
      seed,
      out,
      ...QUIET,
    });
    const state = JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
    const trainIdx = (await loadDataset("mnist", { seed, limit: 48, testLimit: 300 })).train
      .indices;
    assert.equal(state.data.trainDigest, indexDigest(trainIdx));

    // The whole evaluation split (as analyze, attack and the demo choose it), for --seed 0.
    const chosen = await imageEvaluationSplit({
      who: "analyze",
      data: undefined,
      trained: { ...state.data, seed },
      seed: 0,
      n: 5000,
    });
    assert.equal(chosen.info.origin, "checkpoint");
    assert.equal(chosen.info.splitSeed, seed);
    assert.equal(chosen.split.count, 300);
    assert.equal(overlap(trainIdx, chosen.split.indices), 0);

    const analysis = await runAnalyze({
      checkpoint: out,
      model: "vit-micro",
      seed: 0,
      n: 6,
      backend: "wasm",
      mlp: "relaxed",
      headTruth: false,
      blockTruth: false,
      iterations: 5,
      print: false,
      out: join(out, "analysis"),
    });
    assert.equal(analysis.split.origin, "checkpoint");
    assert.equal(overlap(trainIdx, analysis.split.indices), 0);
    assert.deepEqual(analysis.split.indices, chosen.info.indices.slice(0, 6));
    const written = JSON.parse(readFileSync(join(out, "analysis", "analysis.json"), "utf8"));
    assert.equal(written.split.splitSeed, seed);
    assert.equal(written.split.evaluatedDigest, analysis.split.evaluatedDigest);

    const attack = await runAttack({
      checkpoint: out,
      seed: 0,
      n: 40,
      eps: [0],
      attacks: ["fgsm"],
      out: join(out, "attack.json"),
    });
    assert.ok(attack.split !== undefined);
    assert.equal(attack.split.origin, "checkpoint");
    assert.equal(overlap(trainIdx, attack.split.indices), 0);
    assert.deepEqual(attack.split.indices, chosen.info.indices.slice(0, 40));
  }
});

test("a checkpoint whose data changed since training is refused by analyze and attack (exit 2, one line)", async () => {
  const out = join(tempDir(), "ckpt-changed");
  await train({
    data: "mnist",
    model: "vit-micro",
    epochs: 1,
    limit: 32,
    testLimit: 64,
    batchSize: 16,
    seed: 3,
    out,
    ...QUIET,
  });
  const path = join(out, "train_state.json");
  const state = JSON.parse(readFileSync(path, "utf8"));
  // As if the data had shuffled differently: the recorded training digest no longer matches.
  state.data.trainDigest = indexDigest([1, 2, 3]);
  writeFileSync(path, JSON.stringify(state));
  for (const args of [
    ["analyze", out, "--n", "2", "--no-head-truth", "--no-block-truth"],
    ["attack", out, "--n", "2", "--eps", "0"],
  ]) {
    const r = await runAttnlipHere(args);
    assert.equal(r.code, 2, r.stderr);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, r.stderr);
    assert.match(
      lines[0],
      /the training split of mnist rebuilt from the checkpoint's seed is not the one it was trained on/,
    );
  }
  // Older checkpoints without digests still load; the overlap check alone runs.
  delete state.data.trainDigest;
  delete state.data.testDigest;
  writeFileSync(path, JSON.stringify(state));
  const chosen = await imageEvaluationSplit({
    who: "attack",
    data: "mnist",
    trained: { ...state.data, seed: 3 },
    seed: 9,
    n: 64,
  });
  assert.equal(chosen.info.digestsChecked, false);
  assert.equal(chosen.info.splitSeed, 3);
});

test("text data: for split seeds 2, 4 and 6 the evaluated texts are never training texts, and a random init splits by --seed", async () => {
  const file = join(tempDir(), "texts.csv");
  const rows = ["text,label"];
  for (let i = 0; i < 60; i++)
    rows.push(
      `message ${wordPair(i)} ${i % 2 === 0 ? "win cash" : "see you"},${i % 2 === 0 ? "spam" : "ham"}`,
    );
  writeFileSync(file, rows.join("\n") + "\n");
  for (const seed of [2, 4, 6]) {
    const data = await loadTextDataset(`csv:${file}`, { seed, limit: 30 });
    const trained = {
      seed,
      spec: `csv:${file}`,
      limit: 30,
      testLimit: null,
      trainDigest: indexDigest(data.train.indices),
      testDigest: indexDigest(data.test.indices),
    };
    const chosen = await textEvaluationSplit(
      { who: "analyze", data: undefined, trained, seed: 0, n: 100 },
      { classes: 2, tokenizer: data.tokenizer },
    );
    assert.equal(chosen.info.origin, "checkpoint");
    assert.equal(chosen.split.count, 12);
    assert.equal(overlap(data.train.indices, chosen.split.indices), 0);
    // The full training split (before --limit) is excluded too: the test split never changes with limit.
    const full = await loadTextDataset(`csv:${file}`, { seed });
    assert.equal(overlap(full.train.indices, chosen.split.indices), 0);
  }
  const random = await textEvaluationSplit(
    { who: "attack", data: `csv:${file}`, trained: null, seed: 4, n: 3 },
    { classes: 2 },
  );
  assert.equal(random.info.origin, "random-init");
  assert.equal(random.info.splitSeed, 4);
});

test("the report says which test examples an attack and an analysis used, and that older files did not record it", async () => {
  const { buildReport, loadRun } = await import("../../src/report/index.ts");
  const fixtures = new URL("../report/fixtures/", import.meta.url).pathname;
  const dir = tempDir();
  for (const f of [
    "analysis.json",
    "attack.json",
    "config.json",
    "metrics.jsonl",
    "train_state.json",
  ])
    writeFileSync(join(dir, f), readFileSync(join(fixtures, "jasmin", f)));
  const attack = JSON.parse(readFileSync(join(dir, "attack.json"), "utf8"));
  attack.split = {
    spec: "mnist",
    origin: "checkpoint",
    splitSeed: 5,
    trainCount: 4000,
    testCount: 2000,
    evaluated: 80,
    evaluatedDigest: "sha256:0123456789abcdef",
    digestsChecked: true,
    indices: [],
  };
  writeFileSync(join(dir, "attack.json"), JSON.stringify(attack));
  const html = await buildReport([await loadRun(dir, "run")]);
  assert.match(
    html,
    /held-out test split of mnist \(the checkpoint&#39;s: seed 5, 4000 train \/ 2000 test, digests checked\); evaluating the first 80/,
  );
  assert.match(html, /not recorded \(file from an older attnlip\)/); // the fixture's analysis.json
});

/** 80 distinct texts "hate it item W W" (neg) / "love it item W W" (pos), as a CSV file's bytes. */
function reviews(): string {
  const rows = ["text,label"];
  for (let i = 0; i < 80; i++) rows.push(i % 2 === 0 ? `hate it item ${wordPair(i)},neg` : `love it item ${wordPair(i)},pos`);
  return rows.join("\n") + "\n";
}

const TINY_TEXT = tinyText({ vocabSize: 64 });

/** Trains the tiny text model one epoch on `spec` (seed 5) into `out`; returns train_state.json. */
async function trainText(spec: string, out: string) {
  const r = await train({ ...QUIET, data: spec, model: TINY_TEXT, epochs: 1, batchSize: 16, seed: 5, out });
  r.model.dispose();
  return JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
}

/** The CLI's analyze on a checkpoint, run in `cwd`: exit status, stdout, stderr lines. */
// In this process (runAttnlipHere): the refusals come before any work, and a new process's
// start-up would cost more than the analysis.
async function analyzeCli(cwd: string, checkpoint: string, ...args: string[]) {
  const r = await runAttnlipHere(
    ["analyze", checkpoint, "--n", "40", "--no-head-truth", "--no-block-truth", "--out", join(cwd, "analysis"), ...args],
    { cwd },
  );
  return { status: r.code, stdout: r.stdout, stderr: r.stderr.trim().split("\n").filter((l) => l !== "") };
}

// Issue: `train --data csv:/tmp/td/cp1252.csv --seed 5`, then `analyze --data
// csv:/tmp/td/./cp1252.csv` was taken for other data (the recorded spec was compared as a raw
// string) and 30 of the 40 evaluated texts were training texts. The checkpoint's own data is
// now known by the content digest of the file, whatever the path's spelling.
test("a text checkpoint's own data is known by content: every spelling of its path, and a copy elsewhere, gives its held-out split", async () => {
  const dir = realpathSync(tempDir("attnlip-spelling-"));
  const file = join(dir, "d.csv");
  writeFileSync(file, reviews());
  mkdirSync(join(dir, "elsewhere"));
  const out = join(dir, "runs", "cs5");
  const rel = relative(process.cwd(), file);
  const state = await trainText(`csv:${rel}`, out);
  assert.equal(state.data.spec, `csv:${rel}`);
  assert.equal(state.data.contentDigest, sha256Parts([readFileSync(file)]));
  assert.equal(state.data.path, file);
  const own = await loadTextDataset(`csv:${file}`, { seed: 5 });
  const trainIdx = own.train.indices;
  // The old fault, as a value: the test split by seed 0 ("other data") holds training texts.
  const seed0 = await loadTextDataset(`csv:${file}`, { seed: 0 });
  assert.ok(overlap(trainIdx, seed0.test.indices) > 8, "another seed's test split meets this training split");

  writeFileSync(join(dir, "elsewhere", "copy.csv"), reviews());
  const trained = { ...state.data, seed: 5 };
  for (const spec of [
    undefined,
    `csv:${file}`,
    `csv:${dir}/./d.csv`,
    `csv:${dir}/elsewhere/../d.csv`,
    `csv:${join(dir, "elsewhere", "copy.csv")}`,
  ]) {
    const chosen = await textEvaluationSplit(
      { who: "analyze", data: spec, trained, seed: 0, n: 40 },
      { classes: 2, labelNames: state.data.labels },
    );
    assert.equal(chosen.info.origin, "checkpoint", String(spec));
    assert.equal(chosen.info.contentChecked, true);
    assert.equal(chosen.info.digestsChecked, true);
    assert.deepEqual(chosen.info.indices, Array.from(own.test.indices), String(spec));
    assert.equal(overlap(trainIdx, chosen.info.indices), 0);
  }
  // Other content at another path is other data (its own test split by --seed).
  const other = join(dir, "other.csv");
  writeFileSync(other, reviews().replaceAll("item", "thing"));
  const chosen = await textEvaluationSplit(
    { who: "analyze", data: `csv:${other}`, trained, seed: 0, n: 40 },
    { classes: 2, labelNames: state.data.labels },
  );
  assert.equal(chosen.info.origin, "other-data");
  assert.equal(chosen.info.contentChecked, false);

  // The newcomer's way: trained with a relative path, run from another folder with the
  // absolute one. The line says it is the checkpoint's held-out split.
  const r = await analyzeCli(join(dir, "elsewhere"), out, "--data", `csv:${dir}/./d.csv`);
  assert.equal(r.status, 0, r.stderr.join("\n"));
  assert.match(
    r.stdout,
    /data: held-out test split of csv:.*\/\.\/d\.csv \(the checkpoint's: seed 5, 64 train \/ 16 test, content and digests checked\); evaluating the first 16/,
  );
});

test("a checkpoint without a content digest (older attnlip) compares absolute paths, not spellings", async () => {
  const dir = realpathSync(tempDir("attnlip-older-"));
  const file = join(dir, "d.csv");
  writeFileSync(file, reviews());
  const out = join(dir, "run");
  const state = await trainText(`csv:${file}`, out);
  delete state.data.contentDigest;
  delete state.data.path;
  const trained = { ...state.data, seed: 5 };
  const own = await loadTextDataset(`csv:${file}`, { seed: 5 });
  const asked = await textEvaluationSplit(
    { who: "attack", data: `csv:${relative(process.cwd(), dir)}/./d.csv`, trained, seed: 0, n: 40 },
    { classes: 2, labelNames: state.data.labels },
  );
  assert.equal(asked.info.origin, "checkpoint");
  assert.equal(asked.info.contentChecked, false);
  assert.deepEqual(asked.info.indices, Array.from(own.test.indices));
  // A copy elsewhere cannot be recognised without a content digest: other data.
  const copy = join(dir, "copy.csv");
  writeFileSync(copy, reviews());
  const elsewhere = await textEvaluationSplit(
    { who: "attack", data: `csv:${copy}`, trained, seed: 0, n: 40 },
    { classes: 2, labelNames: state.data.labels },
  );
  assert.equal(elsewhere.info.origin, "other-data");
});

// Issue: `sed -i 's/hate it item 0/COMPLETELY DIFFERENT TEXT/' d.csv` kept the labels, so the
// split digests still matched and analyze said "digests checked". The file's content digest
// now differs from the recorded one: analyze, attack and resume refuse, naming the file.
test("a data file edited since training (labels unchanged) is refused by analyze, attack and resume, whatever the spelling", async () => {
  const dir = realpathSync(tempDir("attnlip-edited-"));
  const file = join(dir, "d.csv");
  writeFileSync(file, reviews());
  const out = join(dir, "rel");
  await trainText(`csv:${file}`, out);
  writeFileSync(file, reviews().replace(`hate it item ${wordPair(0)},`, "COMPLETELY DIFFERENT TEXT,"));
  const recorded = sha256Parts([Buffer.from(reviews())]);
  const now = sha256Parts([readFileSync(file)]);
  for (const [cwd, args, name] of [
    [dir, [], file],
    [dir, ["--data", "csv:./d.csv"], "./d.csv"],
  ] as const) {
    const r = await analyzeCli(cwd, out, ...args);
    assert.equal(r.status, 2, r.stderr.join("\n"));
    assert.deepEqual(r.stderr, [
      `attnlip: analyze: the data file ${name} changed since training (content ${now.slice(0, 23)}…, train_state.json records ${recorded.slice(0, 23)}…); which of its examples the checkpoint was trained on is unknown, so it is refused`,
    ]);
  }
  const attack = await runAttnlipHere(["attack", out, "--n", "2", "--eps", "0", "--out", join(dir, "a.json")]);
  assert.equal(attack.code, 2);
  assert.match(attack.stderr.trim(), /^attnlip: attack: the data file .*d\.csv changed since training \(content /);
  await assert.rejects(train({ ...QUIET, resume: out, epochs: 2 }), {
    name: "InputError",
    message: new RegExp(`^resume: the data file ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} changed since training`),
  });
});

// Issue: setting testCount or trainCount in train_state.json to wrong values was accepted, and
// deleting only trainDigest fell back to "no digests recorded, overlap checked".
test("a train_state.json with wrong split sizes or only one split digest is refused (exit 2, one line)", async () => {
  const dir = realpathSync(tempDir("attnlip-weakened-"));
  const file = join(dir, "d.csv");
  writeFileSync(file, reviews());
  const out = join(dir, "run");
  const state = await trainText(`csv:${file}`, out);
  const path = join(out, "train_state.json");
  const cases: [(s: typeof state) => void, RegExp][] = [
    [(s) => (s.data.testCount = 40), /^attnlip: analyze: the test split of csv:.* has 16 examples, train_state\.json records 40;/],
    [(s) => (s.data.trainCount = 10), /^attnlip: analyze: the training split of csv:.* has 64 examples, train_state\.json records 10;/],
    [(s) => delete s.data.trainDigest, /^attnlip: checkpoint .*: train_state\.json: data\.trainDigest: missing while testDigest is recorded;/],
    [(s) => delete s.data.testDigest, /^attnlip: checkpoint .*: train_state\.json: data\.testDigest: missing while trainDigest is recorded;/],
  ];
  for (const [edit, message] of cases) {
    const edited = structuredClone(state);
    edit(edited);
    writeFileSync(path, JSON.stringify(edited));
    const r = await analyzeCli(dir, out);
    assert.equal(r.status, 2, r.stderr.join("\n"));
    assert.equal(r.stderr.length, 1, r.stderr.join("\n"));
    assert.match(r.stderr[0], message);
  }
  // Resume checks the sizes too.
  writeFileSync(path, JSON.stringify({ ...state, data: { ...state.data, testCount: 3 } }));
  await assert.rejects(train({ ...QUIET, resume: out, epochs: 2 }), /^InputError: resume: the test split of csv:.* has 16 examples, train_state\.json records 3;/);
});

test("embedded data: a checkpoint records the set's content digest, and another digest is refused as changed", async () => {
  const out = join(tempDir(), "ckpt-embedded");
  await train({ data: "mnist", model: "vit-micro", epochs: 1, limit: 32, testLimit: 64, batchSize: 16, seed: 2, out, ...QUIET });
  const path = join(out, "train_state.json");
  const state = JSON.parse(readFileSync(path, "utf8"));
  assert.equal(state.data.contentDigest, embeddedMnistDigest());
  assert.equal(state.data.path, undefined);
  const chosen = await imageEvaluationSplit({ who: "analyze", data: "mnist", trained: { ...state.data, seed: 2 }, seed: 0, n: 4 });
  assert.equal(chosen.info.contentChecked, true);
  writeFileSync(path, JSON.stringify({ ...state, data: { ...state.data, contentDigest: "sha256:" + "0".repeat(64) } }));
  const r = await runAttnlipHere(["analyze", out, "--n", "2", "--no-head-truth", "--no-block-truth"]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr.trim(), /^attnlip: analyze: the embedded data set mnist changed since training \(content sha256:[0-9a-f]{16}…, train_state\.json records sha256:0{16}…\)/);
});
