// `attnlip attack --attack autoattack` end to end on a tiny checkpoint with small budgets: the
// table, the robust accuracy after each member, the masking checks' line, and attack.json as its
// schema describes it (the ensemble's detail, the range check, the masking flags); and the
// one-line refusal of an attack that cannot run on the model's class count.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AttackFileSchema } from "../../src/robustness/attackFile.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "attnlip-autoattack-"));

test("attack --attack autoattack prints the ensemble per member and the masking checks, and attack.json records them", async () => {
  const ck = join(dir, "ck");
  const trained = await runAttnlipHere([
    "train",
    "--model",
    "vit-micro",
    "--epochs",
    "1",
    "--limit",
    "256",
    "--test-limit",
    "32",
    "--out",
    ck,
    "--progress",
    "none",
  ]);
  assert.equal(trained.code, 0, trained.stderr);
  const out = join(dir, "aa.json");
  // Budgets cut for time: 5 steps (100 by default), 2 targets (9), 50 queries (5,000).
  const r = await runAttnlipHere([
    "attack",
    ck,
    "--attack",
    "autoattack,apgd",
    "--n",
    "16",
    "--eps",
    "0,0.01,0.02",
    "--steps",
    "5",
    "--targets",
    "2",
    "--queries",
    "50",
    "--batch",
    "8",
    "--workers",
    "2",
    "--out",
    out,
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(
    r.stdout,
    /5 AutoAttack\/APGD-CE steps, 2 AutoAttack targets, 50 AutoAttack queries, range check/,
  );
  assert.match(r.stdout, /AutoAttack robust acc .* APGD-CE robust acc/);
  assert.match(
    r.stdout,
    /^AutoAttack at eps 0\.01: robust accuracy after APGD-CE [0-9.]+%, then APGD-T [0-9.]+%, then Square [0-9.]+% \(inputs broken first by APGD-CE \d+, APGD-T \d+, Square \d+\)$/m,
  );
  assert.match(
    r.stdout,
    /^masking checks: broken by Square only (ok|FIRED); range check at eps 1 (ok|FIRED); zero or non-finite gradients (ok|FIRED); loss not raised (ok|FIRED)$/m,
  );
  const doc = JSON.parse(readFileSync(out, "utf8"));
  AttackFileSchema.parse(doc);
  assert.equal(doc.steps, 5);
  assert.deepEqual(doc.attackSettings.autoattack, {
    steps: 5,
    randomStart: true,
    restarts: 1,
    seed: 0,
    targets: 2,
    queries: 50,
  });
  assert.deepEqual(doc.attackSettings.apgd, { steps: 5, randomStart: true, restarts: 1, seed: 0 });
  const [zero, small, large] = doc.results;
  assert.deepEqual(Object.keys(small.robust), ["autoattack", "apgd"]);
  assert.equal(zero.robust.autoattack, doc.cleanAccuracy);
  assert.equal(zero.ensembles, undefined, "eps 0: no attack ran");
  for (const row of [small, large]) {
    const e = row.ensembles.autoattack;
    assert.deepEqual(e.members, ["apgd", "apgd-t", "square"]);
    assert.equal(e.brokenBy.length, 16);
    assert.equal(e.robustAfter.square, row.robust.autoattack);
    assert.equal(e.robustAfter.apgd, row.robust.apgd, "APGD-CE first, the same run as alone");
    assert.ok(row.robust.autoattack <= row.robust.apgd);
    const broken = e.brokenBy.filter((b: string | null) => b !== null && b !== "clean").length;
    assert.equal(row.robust.autoattack, doc.cleanAccuracy - broken / 16);
    assert.ok(
      row.robust.autoattack < doc.cleanAccuracy,
      `eps ${row.eps}: the ensemble breaks some input`,
    );
    assert.deepEqual(Object.keys(row.lossNotRaised), ["autoattack", "apgd"]);
    assert.deepEqual(Object.keys(row.nonFiniteGradient), ["autoattack", "apgd"]);
  }
  assert.equal(doc.rangeCheck.eps, 1);
  assert.match(doc.rangeCheck.what, /width 1 of the input range \[0, 1\]/);
  for (const check of ["gradientFreeOnly", "rangeNotBroken", "gradientUnusable", "lossNotRaised"]) {
    assert.equal(typeof doc.masking[check].flag, "boolean", check);
    assert.equal(typeof doc.masking[check].line, "string");
  }
  const fired = doc.masking.warnings as string[];
  for (const w of fired) assert.ok(r.stderr.includes(`attack: warning: masking check: ${w}`));
});

test("an attack that cannot run on the model's class count is refused in one line naming --attack, before any work", async () => {
  // text-micro has 2 classes: the DLR loss needs 3.
  const r = await runAttnlipHere([
    "attack",
    "--random-init",
    "--model",
    "text-micro",
    "--attack",
    "apgd-dlr",
  ]);
  assert.equal(r.code, 2);
  assert.match(
    r.stderr,
    /^attnlip: attack: --attack: apgd-dlr: the DLR loss divides by z_pi1 - z_pi3 and needs at least 3 classes, the model has 2; use apgd \(APGD on the cross-entropy\) instead$/m,
  );
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.doesNotMatch(r.stdout, /attacking/);
});
