import { modelPreset } from "../../src/nn/config.ts";
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import { fgsm } from "../../src/robustness/fgsm.ts";
import { pgd } from "../../src/robustness/pgd.ts";
import { evaluateRobustness } from "../../src/robustness/evaluate.ts";
import {
  apgdCheckpoints,
  apgdWithLoss,
  crossEntropyExcess,
  lossPoints,
} from "../../src/robustness/apgd.ts";
import { resolveAttackOptions } from "../../src/robustness/options.ts";
import { lipschitzProxy } from "../../src/robustness/lipschitzProxy.ts";
import { crossEntropySum, inferenceLogits } from "../../src/robustness/loss.ts";
import { crossEntropy } from "../../src/train/loss.ts";

await useBackend("wasm");

/** Tiny ViT: the `vit-micro` preset (28x28 digits, patch 7, 17 tokens, d 16, 2 heads, 1 block). */
const TINY = modelPreset("vit-micro");

const N = 64;
const data = await loadDataset("mnist", { seed: 0, limit: 1024, testLimit: N });

/** The tiny ViT trained for 3 epochs on 1,024 digits with Adam (about 50-60% test accuracy). */
function trainedModel(): TransformerClassifier {
  const model = createModel(TINY, 1) as TransformerClassifier;
  const opt = tf.train.adam(3e-3);
  const { images, labels, count } = data.train;
  const bs = 32;
  for (let epoch = 0; epoch < 3; epoch++)
    for (let s = 0; s + bs <= count; s += bs) {
      const xb = tf.tensor4d(images.subarray(s * 784, (s + bs) * 784), [bs, 28, 28, 1]);
      const yb = tf.tensor1d(labels.subarray(s, s + bs), "int32");
      opt.minimize(
        () => tf.div(crossEntropySum(model.forward(xb).logits, yb), bs) as tf.Scalar,
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

function accuracyOf(input: tf.Tensor): number {
  const t = tf.tidy(() => tf.argMax(model.forward(input).logits, 1));
  const pred = Array.from(t.dataSync());
  t.dispose();
  return pred.reduce((a, p, i) => a + (p === labels[i] ? 1 : 0), 0) / N;
}

/** max |x_adv - x| and the largest per-example ||x_adv - x||_2, in float64; also the value range. */
function distances(adv: tf.Tensor) {
  const a = adv.dataSync();
  const d = a.length / N;
  let linf = 0;
  let l2 = 0;
  let lo = Infinity;
  let hi = -Infinity;
  for (let e = 0; e < N; e++) {
    let s = 0;
    for (let i = e * d; i < (e + 1) * d; i++) {
      const diff = a[i] - clean[i];
      linf = Math.max(linf, Math.abs(diff));
      s += diff * diff;
      lo = Math.min(lo, a[i]);
      hi = Math.max(hi, a[i]);
    }
    l2 = Math.max(l2, Math.sqrt(s));
  }
  return { linf, l2, lo, hi };
}

test("the trained tiny model is better than chance, so the attacks have something to break", () => {
  assert.ok(accuracyOf(x) >= 0.4, `clean accuracy ${accuracyOf(x)}`);
});

test("eps 0 gives the clean accuracy exactly, and the attacks return x unchanged", () => {
  const before = tf.memory().numTensors;
  for (const norm of ["linf", "l2"] as const) {
    const ev = evaluateRobustness(model, x, labels, {
      norm,
      eps: [0, norm === "linf" ? 0.02 : 0.3],
      batchSize: 24,
    });
    assert.equal(ev.cleanAccuracy, accuracyOf(x));
    assert.equal(ev.results[0].attacks.pgd!.robustAccuracy, ev.cleanAccuracy);
    assert.equal(ev.results[0].attacks.fgsm!.robustAccuracy, ev.cleanAccuracy);
    assert.ok(ev.results[0].attacks.pgd!.success.every((s) => s === 0));
    const p = pgd(model, x, labels, { norm, eps: 0, steps: 3, seed: 5 });
    const f = fgsm(model, x, labels, { norm, eps: 0 });
    assert.deepEqual(p.dataSync(), clean, `${norm} pgd eps 0`);
    assert.deepEqual(f.dataSync(), clean, `${norm} fgsm eps 0`);
    tf.dispose([p, f]);
  }
  assert.equal(tf.memory().numTensors, before);
});

test("PGD's robust accuracy is at most FGSM's at the same eps (same examples), and below clean", () => {
  // Asserted for PGD without random start (10 steps of 2.5 eps / 10, starting at x) and, with
  // these fixed seeds, for PGD with random start too.
  for (const [norm, eps] of [
    ["linf", [0.005, 0.01, 0.02]],
    ["l2", [0.1, 0.25, 0.5]],
  ] as const) {
    const noStart = evaluateRobustness(model, x, labels, {
      norm,
      eps,
      steps: 10,
      randomStart: false,
      batchSize: 32,
    });
    const random = evaluateRobustness(model, x, labels, {
      norm,
      eps,
      steps: 10,
      seed: 0,
      attack: "pgd",
      batchSize: 32,
    });
    noStart.results.forEach((r, i) => {
      const f = r.attacks.fgsm!.robustAccuracy;
      assert.ok(
        r.attacks.pgd!.robustAccuracy <= f,
        `${norm} eps ${r.eps}: pgd ${r.attacks.pgd!.robustAccuracy} > fgsm ${f}`,
      );
      assert.ok(
        random.results[i].attacks.pgd!.robustAccuracy <= f,
        `${norm} eps ${r.eps}: random-start pgd > fgsm`,
      );
      assert.equal(random.results[i].attacks.fgsm, undefined, "only the asked attack runs");
      // success = clean correct and broken
      for (let e = 0; e < N; e++)
        if (r.attacks.pgd!.success[e]) assert.equal(noStart.cleanCorrect[e], 1);
    });
    const last = noStart.results.at(-1)!;
    assert.ok(
      last.attacks.pgd!.robustAccuracy < noStart.cleanAccuracy,
      `${norm}: PGD breaks some examples`,
    );
  }
});

test("adversarial inputs stay inside the eps ball and [0, 1]", () => {
  const cases = [
    { norm: "linf" as const, eps: 0.03, stepSize: 0.02 },
    { norm: "linf" as const, eps: 0.3, stepSize: undefined },
    { norm: "l2" as const, eps: 0.5, stepSize: 0.4 },
    { norm: "l2" as const, eps: 3, stepSize: undefined },
  ];
  for (const c of cases) {
    for (const adv of [
      pgd(model, x, labels, { norm: c.norm, eps: c.eps, steps: 5, stepSize: c.stepSize, seed: 11 }),
      fgsm(model, x, labels, { norm: c.norm, eps: c.eps }),
    ]) {
      const d = distances(adv);
      assert.ok(d.lo >= 0 && d.hi <= 1, `${c.norm} ${c.eps}: range [${d.lo}, ${d.hi}]`);
      if (c.norm === "linf") assert.ok(d.linf <= c.eps + 1e-6, `linf ${d.linf} > ${c.eps}`);
      else assert.ok(d.l2 <= c.eps * (1 + 1e-5), `l2 ${d.l2} > ${c.eps}`);
      assert.ok(d.linf > 0, "the attack moved the inputs");
      adv.dispose();
    }
  }
});

test("evaluateRobustness leaves tf.memory().numTensors unchanged and reports progress", () => {
  const before = tf.memory().numTensors;
  const seen: [number, number][] = [];
  const ev = evaluateRobustness(model, x, labels, {
    norm: "l2",
    eps: [0, 0.2, 0.4],
    steps: 3,
    batchSize: 20,
    seed: 4,
    onProgress: (done, total) => seen.push([done, total]),
  });
  assert.equal(tf.memory().numTensors, before);
  assert.equal(ev.count, N);
  // 4 batches x 2 non-zero eps x 2 attacks
  assert.deepEqual(seen.at(-1), [16, 16]);
  assert.equal(seen.length, 16);
  assert.deepEqual(
    ev.results.map((r) => r.stepSize),
    [0, 0.5 / 3, 1 / 3],
  );
  // The same seed gives the same result.
  const again = evaluateRobustness(model, x, labels, {
    norm: "l2",
    eps: [0, 0.2, 0.4],
    steps: 3,
    batchSize: 20,
    seed: 4,
  });
  assert.deepEqual(again.results[2].attacks.pgd!.success, ev.results[2].attacks.pgd!.success);
});

test("bad options, labels and inputs throw RangeError / TypeError", () => {
  const before = tf.memory().numTensors;
  assert.throws(
    () => evaluateRobustness(model, x, labels, { eps: [-0.1] }),
    /eps must be a finite number >= 0/,
  );
  assert.throws(() => evaluateRobustness(model, x, labels, { eps: [NaN] }), RangeError);
  assert.throws(() => evaluateRobustness(model, x, labels, { eps: [] }), /at least one eps/);
  assert.throws(() => evaluateRobustness(model, x, labels, { eps: [0.1], steps: 0 }), /steps/);
  assert.throws(
    () => evaluateRobustness(model, x, labels, { eps: [0.1], batchSize: 0 }),
    /batchSize/,
  );
  assert.throws(
    () => evaluateRobustness(model, x, labels, { eps: [0.1], attack: "cw" as "pgd" }),
    /attack/,
  );
  assert.throws(() => pgd(model, x, labels.subarray(0, 3), { eps: 0.1 }), /expected 64 labels/);
  assert.throws(() => pgd(model, x, new Int32Array(N).fill(10), { eps: 0.1 }), /label 0 is 10/);
  assert.throws(() => fgsm(model, x, labels, { eps: 0.1, norm: "l1" as "l2" }), /norm/);
  const outside = tf.mul(x, 2);
  assert.throws(() => fgsm(model, outside, labels, { eps: 0.1 }), /valid range/);
  const ints = tf.cast(x, "int32");
  assert.throws(() => pgd(model, ints, labels, { eps: 0.1 }), TypeError);
  tf.dispose([outside, ints]);
  assert.equal(tf.memory().numTensors, before);
});

test("lipschitzProxy: margin / (sqrt(2) L) with the exact input-Jacobian norm, 0 when misclassified", () => {
  const sub = tf.slice(x, [0], [12]);
  const before = tf.memory().numTensors;
  const p = lipschitzProxy(model, sub, labels.subarray(0, 12), { batchSize: 5 });
  assert.equal(tf.memory().numTensors, before);
  const logits = tf.tidy(() => model.forward(sub).logits);
  const z = logits.dataSync();
  logits.dispose();
  const L = networkLipschitz(model, sub);
  let wrong = 0;
  for (let e = 0; e < 12; e++) {
    const row = Array.from(z.subarray(e * 10, (e + 1) * 10));
    const y = labels[e];
    const margin = row[y] - Math.max(...row.filter((_, k) => k !== y));
    assert.ok(Math.abs(p.margins[e] - margin) <= 1e-6 * Math.max(1, Math.abs(margin)));
    assert.ok(Math.abs(p.lipschitz[e] - L[e]) <= 1e-9 * L[e]);
    if (margin <= 0) {
      wrong++;
      assert.equal(p.radii[e], 0);
    } else assert.ok(Math.abs(p.radii[e] - margin / (Math.SQRT2 * L[e])) <= 1e-12 * p.radii[e]);
  }
  assert.equal(p.misclassified, wrong);
  assert.ok(wrong > 0 && wrong < 12, `both kinds present (${wrong} misclassified)`);
  sub.dispose();
});

test("APGD: checkpoints as in the paper; eps 0 returns x; inside the ball and [0, 1]; deterministic with a seed", () => {
  assert.deepEqual(apgdCheckpoints(100), [22, 41, 57, 70, 80, 87, 93, 99]);
  assert.deepEqual(apgdCheckpoints(10), [3, 5, 6, 7, 8, 9]);
  const before = tf.memory().numTensors;
  const y = tf.tensor1d(labels, "int32");
  const at = lossPoints(inferenceLogits(model), y);
  for (const norm of ["linf", "l2"] as const) {
    const zero = apgdWithLoss(
      at,
      x,
      resolveAttackOptions({ norm, eps: 0, steps: 4, seed: 3 }, "test"),
    );
    assert.deepEqual(zero.dataSync(), clean, `${norm} eps 0`);
    zero.dispose();
    const eps = norm === "linf" ? 0.05 : 1;
    const settings = resolveAttackOptions({ norm, eps, steps: 6, seed: 7 }, "test");
    const a = apgdWithLoss(at, x, settings);
    const b = apgdWithLoss(at, x, settings);
    assert.deepEqual(a.dataSync(), b.dataSync(), `${norm}: same seed, same result`);
    const d = distances(a);
    assert.ok(d.lo >= 0 && d.hi <= 1, `${norm}: range [${d.lo}, ${d.hi}]`);
    if (norm === "linf") assert.ok(d.linf <= eps + 1e-6, `linf ${d.linf} > ${eps}`);
    else assert.ok(d.l2 <= eps * (1 + 1e-5), `l2 ${d.l2} > ${eps}`);
    assert.ok(accuracyOf(a) < accuracyOf(x), `${norm}: APGD breaks some examples`);
    tf.dispose([a, b]);
  }
  y.dispose();
  assert.equal(tf.memory().numTensors, before, "no tensor left behind");
});

test("APGD's step-size rule at the checkpoints (Croce and Hein 2020, conditions 1 and 2), on scripted losses", () => {
  // One input, gradient always +1, losses given per evaluation (0 = the start): only eta matters.
  const run = (lossAt: (evaluation: number) => number) => {
    let calls = 0;
    const at = (x: tf.Tensor) => {
      const loss = Float32Array.of(lossAt(calls++));
      return { loss, correct: Uint8Array.of(1), grad: tf.onesLike(x) };
    };
    const seen = new Map<number, number>();
    const x0 = tf.zeros([1, 1]);
    const settings = resolveAttackOptions(
      { eps: 1e5, steps: 100, randomStart: false, clip: [-1e9, 1e9] },
      "test",
    );
    const out = apgdWithLoss(at, x0, settings, {
      onCheckpoint: (step, eta) => seen.set(step, eta[0]),
    });
    tf.dispose([out, x0]);
    assert.equal(calls, 101, "steps + 1 evaluations");
    return seen;
  };
  const eta0 = 2e5;
  // Condition 1: the loss falls for 22 steps (no step raised it): halved at 22. It then rises at
  // every step while staying below the best: not halved at 41 (condition 1 fails: every step
  // raised it; condition 2 fails: eta was halved at the last checkpoint).
  const a = run((e) => (e <= 22 ? 100 - e : 50 + e / 10));
  assert.equal(a.get(22), eta0 / 2);
  assert.equal(a.get(41), eta0 / 2);
  // Condition 2 at the first checkpoint: the loss rises at every step but never reaches the
  // start's: the best has not risen since the start, so eta is halved at 22.
  const b = run((e) => (e === 0 ? 1000 : e));
  assert.equal(b.get(22), eta0 / 2);
  // Rising above the start at every step: never halved.
  const c = run((e) => e);
  for (const [step, value] of c) assert.equal(value, eta0, `step ${step}`);
});

test("APGD's robust accuracy is never above PGD's on the same inputs and budget (beyond 2 of 64), and eps 0 is clean", () => {
  for (const [norm, eps] of [
    ["linf", [0, 0.005, 0.01, 0.02]],
    ["l2", [0, 0.1, 0.25, 0.5]],
  ] as const) {
    const ev = evaluateRobustness(model, x, labels, {
      norm,
      eps,
      steps: 10,
      seed: 0,
      attack: ["pgd", "apgd"],
      batchSize: 32,
    });
    const few = evaluateRobustness(model, x, labels, {
      norm,
      eps,
      steps: 1,
      seed: 0,
      attack: ["pgd", "apgd"],
      batchSize: 32,
    });
    // With a single step APGD moves once, as PGD does.
    few.results.forEach((r) =>
      assert.ok(
        r.attacks.apgd!.robustAccuracy <= r.attacks.pgd!.robustAccuracy + 2 / N,
        `${norm} 1 step eps ${r.eps}`,
      ),
    );
    assert.equal(ev.results[0].attacks.apgd!.robustAccuracy, ev.cleanAccuracy, `${norm}: eps 0`);
    for (const r of ev.results) {
      const a = r.attacks.apgd!.robustAccuracy;
      const p = r.attacks.pgd!.robustAccuracy;
      assert.ok(a <= p + 2 / N, `${norm} eps ${r.eps}: apgd ${a} > pgd ${p}`);
      assert.ok(a <= ev.cleanAccuracy);
    }
  }
});

test("APGD restarts: never fewer inputs broken than one run, deterministic; --restarts is checked", () => {
  const one = evaluateRobustness(model, x, labels, {
    norm: "linf",
    eps: [0.005, 0.01],
    steps: 5,
    seed: 2,
    attack: "apgd",
    batchSize: 32,
  });
  const three = evaluateRobustness(model, x, labels, {
    norm: "linf",
    eps: [0.005, 0.01],
    steps: 5,
    seed: 2,
    attack: "apgd",
    restarts: 3,
    batchSize: 32,
  });
  const again = evaluateRobustness(model, x, labels, {
    norm: "linf",
    eps: [0.005, 0.01],
    steps: 5,
    seed: 2,
    attack: "apgd",
    restarts: 3,
    batchSize: 32,
  });
  three.results.forEach((r, i) => {
    assert.ok(
      r.attacks.apgd!.robustAccuracy <= one.results[i].attacks.apgd!.robustAccuracy,
      `eps ${r.eps}`,
    );
    assert.deepEqual(r.attacks.apgd!.success, again.results[i].attacks.apgd!.success);
    // Every input the single run broke stays broken (the first run is the same run).
    one.results[i].attacks.apgd!.success.forEach((s, e) =>
      assert.ok(!s || r.attacks.apgd!.success[e], `eps ${r.eps} input ${e}`),
    );
  });
  assert.throws(
    () => resolveAttackOptions({ eps: 0.1, restarts: 0 }, "apgd"),
    /apgd: restarts must be an integer >= 1, got 0/,
  );
});

test("crossEntropyExcess is CE - ln C in float64, and orders losses that float32's cross-entropy cannot tell apart", () => {
  const rows = [
    [1.5, -2, 0.25],
    [-Infinity, 3, 1],
    [0, 800, -800],
  ];
  for (const [r, z] of rows.entries())
    for (const y of [0, 1, 2]) {
      if (z[y] === -Infinity) continue;
      const m = Math.max(...z);
      const ce = m + Math.log(z.reduce((a, v) => a + Math.exp(v - m), 0)) - z[y];
      const got = crossEntropyExcess(z, 3, 0, y);
      assert.ok(
        Math.abs(got - (ce - Math.log(3))) <= 1e-12 * Math.max(1, Math.abs(ce)),
        `row ${r} label ${y}: ${got} vs ${ce - Math.log(3)}`,
      );
    }
  assert.equal(crossEntropyExcess([-Infinity, 3, 1], 3, 0, 0), Infinity, "a true class ruled out");
  // Logits of size 1e-10: float32's cross-entropy is ln 3 for both rows; the excess orders them.
  const near = [
    [1e-10, 0, 0],
    [2e-10, 0, 0],
  ];
  const f32 = tf.tidy(() =>
    crossEntropy(tf.tensor2d(near), tf.tensor1d([0, 0], "int32"), "none").dataSync(),
  );
  assert.equal(f32[0], f32[1], "float32 cannot tell them apart");
  const [a, b] = near.map((z) => crossEntropyExcess(z, 3, 0, 0));
  assert.ok(b < a && a < 0, `${b} < ${a} < 0`);
  assert.ok(Math.abs(a - Math.log1p((2 * Math.expm1(-1e-10)) / 3)) < 1e-24);
});

test("APGD under a flat loss (logits scaled by 1e-10): robust accuracy at most PGD's, and the step size does not collapse", () => {
  // Issue 38: float32 resolves the cross-entropy near ln 10 to 2.4e-7 only, so with logits of
  // size 1e-10 every loss compared equal and APGD halved its step at all 6 checkpoints of 10
  // steps (2 eps -> 2 eps / 64, every input); on wasm, l_inf steps also lost every gradient
  // entry below 1.2e-7 (tf.sign), so FGSM broke no input.
  const scaled = Object.create(model) as TransformerClassifier;
  scaled.forward = (input, options) => ({
    logits: tf.tidy(() => tf.mul(model.forward(input, options).logits, 1e-10)),
    trace: null,
  });
  const y = tf.tensor1d(labels, "int32");
  const at = lossPoints(inferenceLogits(scaled), y);
  for (const [norm, eps] of [
    ["l2", [0.1, 0.2, 0.4]],
    ["linf", [0.003, 0.01, 0.02]],
  ] as const) {
    const ev = evaluateRobustness(scaled, x, labels, {
      norm,
      eps,
      steps: 10,
      seed: 0,
      attack: ["fgsm", "pgd", "apgd"],
      batchSize: 32,
    });
    for (const r of ev.results) {
      const a = r.attacks.apgd!.robustAccuracy;
      const p = r.attacks.pgd!.robustAccuracy;
      assert.ok(a <= p + 2 / N, `${norm} eps ${r.eps}: apgd ${a} > pgd ${p}`);
    }
    const last = ev.results[ev.results.length - 1].attacks;
    assert.ok(
      last.fgsm!.robustAccuracy <= ev.cleanAccuracy - 0.1,
      `${norm}: FGSM breaks inputs (${last.fgsm!.robustAccuracy} vs clean ${ev.cleanAccuracy})`,
    );
    for (const e of eps) {
      let final: Float64Array = new Float64Array(0);
      const adv = apgdWithLoss(
        at,
        x,
        resolveAttackOptions({ norm, eps: e, steps: 10, seed: 0 }, "test"),
        {
          onCheckpoint: (_step, eta) => (final = eta),
          onWarning: () => {},
        },
      );
      adv.dispose();
      const floor = (2 * e) / 64;
      const collapsed = final.filter((v) => v <= floor * (1 + 1e-9)).length;
      assert.equal(final.length, N);
      assert.ok(
        collapsed <= N / 4,
        `${norm} eps ${e}: ${collapsed} of ${N} step sizes at the floor ${floor}`,
      );
    }
  }
  y.dispose();
});

test("teardown", () => {
  x.dispose();
  model.dispose();
});
