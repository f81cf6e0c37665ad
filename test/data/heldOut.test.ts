// Issue: analyze and attack on a checkpoint split embedded MNIST with --seed, not with the
// seed the checkpoint was trained with (415 of 2,000 "test" digits were training digits for a
// checkpoint trained with --seed 5). Every command that evaluates a checkpoint now uses the
// checkpoint's own held-out split; these tests hold that for several training seeds, on
// images and text, and check the refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { useBackend } from "../../src/backend.ts";
import { runAnalyze } from "../../src/cli/analyzeRun.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import { imageEvaluationSplit, textEvaluationSplit } from "../../src/data/evaluationInputs.ts";
import { checkHeldOut, indexDigest } from "../../src/data/heldOut.ts";
import { loadEmbeddedMnist } from "../../src/data/mnist.ts";
import { loadTextDataset } from "../../src/data/text/dataset.ts";
import { runAttack } from "../../src/cli/attackRun.ts";
import { InputError } from "../../src/util/errors.ts";
import { train } from "../../src/train/trainer.ts";
import { QUIET, tempDir } from "../train/helpers.ts";

await useBackend("wasm");
const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));

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
      checkHeldOut("attack", "csv:x.csv", { trainDigest: indexDigest([1, 2]) }, [1, 3], [4], [4]),
    {
      name: "InputError",
      message:
        /^attack: the training split of csv:x\.csv rebuilt from the checkpoint's seed is not the one it was trained on/,
    },
  );
  assert.throws(
    () => checkHeldOut("attack", "spam", { testDigest: indexDigest([9]) }, [1, 3], [4], [4]),
    { name: "InputError", message: /^attack: the test split of spam rebuilt/ },
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
    const r = spawnSync(process.execPath, [bin, ...args], { encoding: "utf8" });
    assert.equal(r.status, 2, r.stderr);
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
      `message number ${i} ${i % 2 === 0 ? "win cash" : "see you"},${i % 2 === 0 ? "spam" : "ham"}`,
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
