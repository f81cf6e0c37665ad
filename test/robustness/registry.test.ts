import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { attackChoices, parseAttackFlags } from "../../src/cli/attackCommand.ts";
import { InputError } from "../../src/util/errors.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { TextClassifier } from "../../src/nn/textClassifier.ts";
import {
  attackNames,
  attackSpec,
  embeddingBatch,
  evaluateRobustness,
  evaluateTextRobustness,
  randomOffsetLinf,
  registerAttack,
  resolveAttackOptions,
  unregisterAttack,
  upgradeAttackResult,
  NO_CLIP,
  type AttackSpec,
} from "../../src/robustness/index.ts";
import { runAttack } from "../../src/pipelines/attackRun.ts";
import { buildReport, loadRun } from "../../src/report/index.ts";
import { FIXTURES } from "../report/helpers.ts";

// A toy attack registered through the public registration reaches the evaluation (images and
// text), the command's --attack choices, attack.json and the report's columns.

await useBackend("wasm");

/**
 * Random signs: x + eps * s, s a seeded random sign per entry, masked and clipped. It reads the
 * shared seed (evaluation gives each batch and radius its own stream).
 */
const RANDOM_SIGN: AttackSpec = {
  name: "random-sign",
  label: "RandSign",
  summary: "eps times a random sign per entry (a baseline, no gradient)",
  options: { seed: { default: 0, help: "seed of the signs" } },
  run: ({ batch, settings }) => {
    const offset = randomOffsetLinf(batch.x.shape, 1, settings.seed);
    const out = tf.tidy(() => {
      const step = tf.mul(settings.eps, tf.sign(offset));
      const moved = tf.add(batch.x, batch.mask === null ? step : batch.mask(step));
      return tf.clipByValue(moved, batch.clip[0], batch.clip[1]);
    });
    offset.dispose();
    return out;
  },
};

registerAttack(RANDOM_SIGN);

/** Two classes on inputs [b, 4] in [0, 1]: logits [x_0, 0.5]. */
const linear = {
  config: { classes: 2 },
  forward: (x: tf.Tensor) => ({
    logits: tf.tidy(() => {
      const flat = tf.reshape(x, [x.shape[0] as number, -1]);
      const x0 = tf.slice(flat, [0, 0], [-1, 1]);
      return tf.concat([x0, tf.fill(x0.shape, 0.5)], 1);
    }),
  }),
} as unknown as TransformerClassifier;

test("registration: the name is listed after the built-ins; bad, reserved and taken names are refused", () => {
  assert.deepEqual(attackNames(), [
    "pgd",
    "fgsm",
    "apgd",
    "apgd-dlr",
    "apgd-t",
    "square",
    "autoattack",
    "random-sign",
  ]);
  assert.equal(attackSpec("random-sign").label, "RandSign");
  assert.throws(() => registerAttack(RANDOM_SIGN), /already registered/);
  assert.throws(() => registerAttack({ ...RANDOM_SIGN, name: "both" }), /reserved/);
  assert.throws(() => registerAttack({ ...RANDOM_SIGN, name: "Bad Name" }), /lower-case/);
  assert.throws(
    () => attackSpec("cw", "me"),
    /^RangeError: me: unknown attack "cw" \(registered: pgd, fgsm, apgd, apgd-dlr, apgd-t, square, autoattack, random-sign\)/,
  );
  assert.equal(unregisterAttack("nothing"), false);
});

test("the toy attack runs through evaluateRobustness beside FGSM: eps 0 is clean, robust <= clean", () => {
  const x = tf.tensor2d([
    [0.9, 0, 0, 0],
    [0.55, 1, 1, 1],
    [0.1, 0.5, 0.5, 0.5],
    [0.45, 0, 1, 0],
  ]);
  const labels = [0, 0, 1, 1];
  const before = tf.memory().numTensors;
  const r = evaluateRobustness(linear, x, labels, {
    eps: [0, 0.1, 1],
    attack: ["random-sign", "fgsm"],
    batchSize: 3,
  });
  assert.equal(tf.memory().numTensors, before);
  assert.equal(r.cleanAccuracy, 1);
  assert.deepEqual(Object.keys(r.results[1].attacks), ["random-sign", "fgsm"]);
  assert.equal(r.results[0].attacks["random-sign"]!.robustAccuracy, 1);
  assert.equal(r.results[0].attacks["random-sign"]!.zeroGradientFraction, null);
  for (const e of [1, 2]) {
    const toy = r.results[e].attacks["random-sign"]!;
    assert.ok(toy.robustAccuracy <= r.cleanAccuracy);
    assert.equal(toy.zeroGradientFraction, 0, "the toy never reports a zero gradient");
  }
  // FGSM at eps 1 breaks every example (x_0 moves across 0.5); the toy's signs are seeded.
  assert.equal(r.results[2].attacks.fgsm!.robustAccuracy, 0);
  const again = evaluateRobustness(linear, x, labels, {
    eps: [0, 0.1, 1],
    attack: "random-sign",
    batchSize: 3,
  });
  assert.deepEqual(
    again.results[2].attacks["random-sign"]!.success,
    r.results[2].attacks["random-sign"]!.success,
  );
  x.dispose();
});

test("the toy attack in embedding space: padding rows untouched, no clipping, through evaluateTextRobustness", () => {
  const m = new TextClassifier(
    {
      kind: "text",
      vocabSize: 50,
      maxLength: 8,
      dModel: 8,
      heads: 2,
      blocks: 1,
      mlpHidden: 16,
      classes: 2,
      pooling: "cls",
    },
    1,
  );
  const ids = tf.tensor2d(
    [
      [2, 5, 6, 0],
      [2, 7, 0, 0],
    ],
    [2, 4],
    "int32",
  );
  const mask = tf.tidy(() => tf.cast(tf.notEqual(ids, 0), "float32"));
  const batch = embeddingBatch(m, { ids, mask });
  const settings = resolveAttackOptions({ eps: 3, clip: NO_CLIP, seed: 1 }, "test");
  const adv = RANDOM_SIGN.run({
    batch,
    kind: "embedding",
    labels: tf.tensor1d([0, 1], "int32"),
    settings,
    who: "t",
  });
  const d = tf.tidy(() => tf.sub(adv, batch.x).arraySync()) as number[][][];
  const maskData = mask.arraySync() as number[][];
  d.forEach((rows, b) =>
    rows.forEach((row, i) =>
      row.forEach((v) =>
        assert.ok(maskData[b][i] === 0 ? v === 0 : Math.abs(Math.abs(v) - 3) < 1e-5),
      ),
    ),
  );
  tf.dispose([adv]);
  batch.dispose();
  const r = evaluateTextRobustness(m, { ids, mask }, [0, 1], {
    eps: [0, 0.5],
    attack: "random-sign",
  });
  assert.deepEqual(Object.keys(r.results[1].attacks), ["random-sign"]);
  assert.ok(r.results[1].attacks["random-sign"]!.robustAccuracy <= r.cleanAccuracy);
  tf.dispose([ids, mask]);
  m.dispose();
});

test("the command offers the registered attack: --attack choices, lists and the message", () => {
  assert.deepEqual(attackChoices(), [
    "pgd",
    "fgsm",
    "apgd",
    "apgd-dlr",
    "apgd-t",
    "square",
    "autoattack",
    "random-sign",
    "both",
  ]);
  assert.deepEqual(parseAttackFlags({ attack: "random-sign" }).attacks, ["random-sign"]);
  assert.deepEqual(parseAttackFlags({ attack: "random-sign, pgd" }).attacks, [
    "random-sign",
    "pgd",
  ]);
  assert.deepEqual(parseAttackFlags({ attack: "both" }).attacks, ["fgsm", "pgd"]);
  assert.deepEqual(parseAttackFlags({}).attacks, ["fgsm", "pgd"]);
  assert.throws(
    () => parseAttackFlags({ attack: "cw" }),
    (e: unknown) =>
      e instanceof InputError &&
      /^attack: --attack: expected pgd, fgsm, apgd, apgd-dlr, apgd-t, square, autoattack, random-sign or both \(or several names separated by commas\), got "cw"$/.test(
        e.message,
      ),
  );
});

test("attack.json gets a robust column for the toy attack, and the report draws it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-registry-"));
  copyFileSync(join(FIXTURES.minimal, "analysis.json"), join(dir, "analysis.json"));
  const log = console.log;
  console.log = () => {};
  try {
    await runAttack({
      model: "vit-micro",
      randomInit: true,
      n: 4,
      eps: [0, 0.1],
      attacks: ["pgd", "random-sign"],
      steps: 1,
      out: join(dir, "attack.json"),
    });
  } finally {
    console.log = log;
  }
  const doc = JSON.parse(readFileSync(join(dir, "attack.json"), "utf8"));
  assert.deepEqual(Object.keys(doc.results[1].robust), ["pgd", "random-sign"]);
  assert.deepEqual(doc.results[0].zeroGradient, { pgd: null, "random-sign": null });
  assert.equal(doc.results[0].robust["random-sign"], doc.cleanAccuracy);
  const run = await loadRun(dir, "toy");
  assert.equal(run.attack!.results[1].robust["random-sign"], doc.results[1].robust["random-sign"]);
  const html = await buildReport([{ dir, name: "toy" }]);
  const section = /<section id="robustness">[\s\S]*?<\/section>/.exec(html)![0];
  assert.match(section, /toy PGD/);
  assert.match(section, /toy RandSign/);
  assert.doesNotMatch(section, /toy FGSM/, "no column for an attack that did not run");
  assert.match(section, /PGD solid, RandSign dashed/);
});

test("older attack.json rows (one column per attack) are converted on load", async () => {
  assert.deepEqual(
    upgradeAttackResult({ eps: 0.1, pgd: 0.5, fgsm: null, zeroGradient: { pgd: 0, fgsm: null } }),
    { eps: 0.1, robust: { pgd: 0.5 }, zeroGradient: { pgd: 0 } },
  );
  assert.deepEqual(upgradeAttackResult({ eps: 0, pgd: 1, fgsm: 1 }), {
    eps: 0,
    robust: { pgd: 1, fgsm: 1 },
  });
  const old = JSON.parse(readFileSync(join(FIXTURES.jasmin, "attack.json"), "utf8"));
  assert.ok("pgd" in old.results[0], "the fixture is in the older layout");
  const run = await loadRun(FIXTURES.jasmin);
  run.attack!.results.forEach((r, i) => {
    assert.equal(r.robust.pgd, old.results[i].pgd);
    assert.equal(r.robust.fgsm, old.results[i].fgsm);
    assert.ok(!("pgd" in r), "the old column is gone");
  });
});
