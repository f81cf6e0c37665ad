import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import { modelPreset } from "../../src/nn/config.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { InputError } from "../../src/util/errors.ts";
import {
  attackSpec,
  checkAttackClasses,
  crossEntropySum,
  dlrValue,
  DLR_LOSS,
  evaluateRobustness,
  imageBatch,
  maskingChecks,
  resolveAttackOptions,
  targetedDlrLoss,
  targetedDlrValue,
} from "../../src/robustness/index.ts";
import { attackResultsOf } from "../../src/robustness/attackSummary.ts";

// APGD-DLR, APGD-T, Square and the AutoAttack ensemble on the tiny ViT trained for a few
// seconds (about 50% clean accuracy on these 32 digits), with small budgets.

await useBackend("wasm");

const N = 32;
const data = await loadDataset("mnist", { seed: 0, limit: 1024, testLimit: N });

/** The `vit-micro` preset trained for 3 epochs on 1,024 digits with Adam. */
function trainedModel(): TransformerClassifier {
  const model = createModel(modelPreset("vit-micro"), 1) as TransformerClassifier;
  const opt = tf.train.adam(3e-3);
  const { images, labels, count } = data.train;
  for (let epoch = 0; epoch < 3; epoch++)
    for (let s = 0; s + 32 <= count; s += 32) {
      const xb = tf.tensor4d(images.subarray(s * 784, (s + 32) * 784), [32, 28, 28, 1]);
      const yb = tf.tensor1d(labels.subarray(s, s + 32), "int32");
      opt.minimize(
        () => tf.div(crossEntropySum(model.forward(xb).logits, yb), 32) as tf.Scalar,
        false,
        model.variables(),
      );
      tf.dispose([xb, yb]);
    }
  opt.dispose();
  return model;
}

const model = trainedModel();
const x = tf.tensor4d(data.test.images, [N, 28, 28, 1]);
const labels = data.test.labels;
const clean = x.dataSync();
const EPS = { linf: 0.01, l2: 0.3 } as const;
/** Small budgets, cut for time: 5 steps (the paper: 100), 3 targets (9), 100 queries (5,000). */
const BUDGET = { steps: 5, targets: 3, queries: 100 };

/** One registered attack's run on the whole batch, with its distances to x (float64). */
function runOn(name: string, norm: "linf" | "l2", seed = 0) {
  const y = tf.tensor1d(labels, "int32");
  const batch = imageBatch(model, x, [0, 1]);
  const settings = resolveAttackOptions({ norm, eps: EPS[norm], ...BUDGET, seed }, "test", x.shape);
  const adv = attackSpec(name).run({
    batch,
    kind: "image",
    labels: y,
    settings,
    who: name,
    onWarning: () => {},
  });
  const a = adv.dataSync();
  const predicted = tf.tidy(() => tf.argMax(model.forward(adv).logits, 1));
  const pred = predicted.dataSync();
  tf.dispose([adv, y, predicted]);
  const d = a.length / N;
  let linf = 0;
  let l2 = 0;
  let lo = Infinity;
  let hi = -Infinity;
  for (let e = 0; e < N; e++) {
    let s = 0;
    for (let i = e * d; i < (e + 1) * d; i++) {
      linf = Math.max(linf, Math.abs(a[i] - clean[i]));
      s += (a[i] - clean[i]) ** 2;
      lo = Math.min(lo, a[i]);
      hi = Math.max(hi, a[i]);
    }
    l2 = Math.max(l2, Math.sqrt(s));
  }
  const accuracy = Array.from(pred).filter((p, i) => p === labels[i]).length / N;
  return { accuracy, linf, l2, lo, hi, values: a };
}

const cleanAccuracy =
  Array.from(tf.tidy(() => tf.argMax(model.forward(x).logits, 1)).dataSync()).filter(
    (p, i) => p === labels[i],
  ).length / N;

test("APGD-DLR, APGD-T, Square and AutoAttack each lower the accuracy, stay in the ball and [0, 1], and repeat with a seed", () => {
  assert.ok(cleanAccuracy >= 0.4, `clean accuracy ${cleanAccuracy}`);
  const before = tf.memory().numTensors;
  for (const norm of ["linf", "l2"] as const)
    for (const name of ["apgd-dlr", "apgd-t", "square", "autoattack"]) {
      const r = runOn(name, norm);
      assert.ok(
        r.accuracy < cleanAccuracy,
        `${norm} ${name}: ${r.accuracy} vs clean ${cleanAccuracy}`,
      );
      assert.ok(r.lo >= 0 && r.hi <= 1, `${norm} ${name}: range [${r.lo}, ${r.hi}]`);
      if (norm === "linf") assert.ok(r.linf <= EPS.linf + 1e-6, `${name}: l_inf ${r.linf}`);
      else assert.ok(r.l2 <= EPS.l2 * (1 + 1e-5), `${name}: l_2 ${r.l2}`);
      assert.deepEqual(
        runOn(name, norm).values,
        r.values,
        `${norm} ${name}: same seed, same points`,
      );
    }
  assert.equal(tf.memory().numTensors, before, "no tensor left behind");
});

test("AutoAttack's robust accuracy is at most APGD-CE's alone and at most the accuracy after each member; brokenBy names who broke each input", () => {
  for (const norm of ["linf", "l2"] as const) {
    const ev = evaluateRobustness(model, x, labels, {
      norm,
      eps: [0, EPS[norm] / 2, EPS[norm]],
      attack: ["apgd", "apgd-t", "square", "autoattack"],
      ...BUDGET,
    });
    const record = attackResultsOf(ev, ["apgd", "apgd-t", "square", "autoattack"], 10);
    ev.results.slice(1).forEach((r, k) => {
      const ensemble = r.attacks.autoattack!;
      const alone = r.attacks.apgd!;
      assert.ok(ensemble.robustAccuracy <= alone.robustAccuracy, `${norm} eps ${r.eps}`);
      // The same APGD-CE run: every input it breaks alone, the ensemble breaks.
      alone.success.forEach((s, i) => assert.ok(!s || ensemble.success[i], `${norm} input ${i}`));
      const by = ensemble.brokenBy!;
      by.forEach((b, i) => {
        assert.equal(b !== null, ensemble.success[i] === 1, `${norm} input ${i}: brokenBy ${b}`);
        if (b !== null) assert.ok(["apgd", "apgd-t", "square"].includes(b));
      });
      const detail = record.results[k + 1].ensembles!.autoattack;
      assert.deepEqual(detail.members, ["apgd", "apgd-t", "square"]);
      const after = detail.members.map((m) => detail.robustAfter[m]);
      after.forEach((v, j) => {
        assert.ok(ensemble.robustAccuracy <= v + 1e-12);
        if (j > 0) assert.ok(v <= after[j - 1]);
      });
      assert.equal(after.at(-1), ensemble.robustAccuracy);
      assert.equal(
        detail.robustAfter.apgd,
        alone.robustAccuracy,
        "APGD-CE first: its own robust accuracy",
      );
      detail.brokenBy.forEach((b, i) => assert.equal(b === "clean", ev.cleanCorrect[i] === 0));
    });
    assert.equal(
      ev.results[0].attacks.autoattack!.robustAccuracy,
      ev.cleanAccuracy,
      "eps 0: clean",
    );
    assert.deepEqual(
      maskingChecks(ev).warnings,
      [],
      `${norm}: nothing points to masking on this model`,
    );
  }
});

test("the DLR losses: the paper's formulas in float64, and the float32 sums for the gradient agree", () => {
  // z = [3, 1, 0, -1], y = 0: DLR = -(3 - 1) / (3 - 0); targeted to 1: -(3 - 1) / (3 - (0 - 1) / 2).
  assert.ok(Math.abs(dlrValue([3, 1, 0, -1], 4, 0, 0) - -2 / 3) < 1e-12);
  assert.ok(Math.abs(targetedDlrValue([3, 1, 0, -1], 4, 0, 0, 1) - -2 / 3.5) < 1e-12);
  // Shifting and scaling the logits leaves them unchanged.
  assert.ok(Math.abs(dlrValue([3e-6, 1e-6, 0, -1e-6], 4, 0, 0) - -2 / 3) < 1e-6);
  // A masked class (-inf): fewer than 3 live classes give the plain difference.
  assert.equal(dlrValue([5, 4, -Infinity], 3, 0, 0), -1);
  assert.ok(
    Math.abs(targetedDlrValue([3, 1, 0, -Infinity], 4, 0, 0, 1) - -2 / 3) < 1e-12,
    "z_pi4 masked: z_pi1 - z_pi3",
  );
  const z = [
    [3, 1, 0, -1],
    [0.2, 0.5, 0.1, -Infinity],
    [5, 4, -Infinity, -Infinity],
  ];
  const logits = tf.tensor2d(z);
  const y = tf.tensor1d([0, 0, 0], "int32");
  const flat = z.flat();
  const sum = DLR_LOSS.sum(logits, y).dataSync()[0];
  const want = [0, 1, 2].reduce((a, r) => a + dlrValue(flat, 4, r, 0), 0);
  assert.ok(Math.abs(sum - want) < 1e-5, `${sum} vs ${want}`);
  const targets = Int32Array.of(1, 1, 1);
  const tsum = targetedDlrLoss(targets).sum(logits, y).dataSync()[0];
  const twant = [0, 1, 2].reduce((a, r) => a + targetedDlrValue(flat, 4, r, 0, 1), 0);
  assert.ok(Math.abs(tsum - twant) < 1e-5, `${tsum} vs ${twant}`);
  const g = tf.grad((l: tf.Tensor) => DLR_LOSS.sum(l, y))(logits);
  assert.ok(
    Array.from(g.dataSync()).every(Number.isFinite),
    "a finite gradient beside -inf logits",
  );
  tf.dispose([logits, y, g]);
});

test("class counts: APGD-DLR and APGD-T refuse 2 classes naming apgd, APGD-T takes fewer targets, AutoAttack leaves APGD-T out", () => {
  assert.throws(
    () => checkAttackClasses(["apgd-dlr"], 2, 9, "attack: --attack"),
    (e: unknown) =>
      e instanceof InputError &&
      /^attack: --attack: apgd-dlr: the DLR loss .* needs at least 3 classes, the model has 2; use apgd \(APGD on the cross-entropy\) instead$/.test(
        e.message,
      ),
  );
  assert.throws(
    () => checkAttackClasses(["apgd-t"], 2, 9, "me"),
    /^InputError: me: apgd-t: with 2 classes the only target is the other class.*use apgd/,
  );
  assert.deepEqual(checkAttackClasses(["apgd-t"], 10, 9, "me"), []);
  assert.deepEqual(checkAttackClasses(["apgd-t"], 5, 9, "me"), [
    "apgd-t: 4 target classes (every class but the true one; the model has 5), not 9",
  ]);
  assert.deepEqual(checkAttackClasses(["apgd-t"], 3, 2, "me"), [
    "apgd-t: its loss's scale is z_pi1 - z_pi3 (no 4th class for (z_pi3 + z_pi4) / 2)",
  ]);
  assert.deepEqual(checkAttackClasses(["autoattack", "pgd"], 2, 9, "me"), [
    "autoattack: with 2 classes APGD-T is left out (its one target would be the other class, where it repeats APGD-CE): APGD-CE, then Square",
  ]);
  assert.deepEqual(attackSpec("autoattack").members!(2), ["apgd", "square"]);
  // On a 2-class model the evaluation refuses apgd-dlr before any work, and runs AutoAttack without APGD-T.
  const two = {
    config: { classes: 2 },
    forward: (t: tf.Tensor) => ({
      logits: tf.tidy(() => {
        const first = tf.slice(tf.reshape(t, [t.shape[0] as number, -1]), [0, 0], [-1, 1]);
        return tf.concat([first, tf.fill(first.shape, 0.5)], 1);
      }),
    }),
  } as unknown as TransformerClassifier;
  const inputs = tf.tensor2d([
    [0.9, 0, 0, 0],
    [0.55, 1, 1, 1],
    [0.1, 0.5, 0.5, 0.5],
    [0.45, 0, 1, 0],
  ]);
  assert.throws(
    () => evaluateRobustness(two, inputs, [0, 0, 1, 1], { eps: [0.1], attack: "apgd-dlr" }),
    InputError,
  );
  const ev = evaluateRobustness(two, inputs, [0, 0, 1, 1], {
    eps: [0.1],
    attack: "autoattack",
    steps: 3,
    queries: 20,
  });
  assert.equal(
    ev.results[0].attacks.autoattack!.robustAccuracy,
    0.5,
    "the inputs within 0.1 of 0.5 fall",
  );
  assert.ok(ev.results[0].attacks.autoattack!.brokenBy!.every((b) => b !== "apgd-t"));
  assert.match(ev.notes[0], /APGD-T is left out/);
  inputs.dispose();
});
