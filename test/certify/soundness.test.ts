// Soundness of `attnlip certify` (issue 36): on a trained vit-micro (models/vit-micro-mnist) at
// held-out digits, and on the Hugging Face BERT fixture in token-embedding space,
// (a) PGD and APGD with many steps and restarts at each certified radius change no prediction
//     (while at a large radius they do: the attacks work);
// (b) the Jacobian norm at points sampled in the ball, and at points found by maximising it
//     there, never exceeds L(x, r); L(x, 0) is at least the true value at x, and L grows with r;
// (c) an independent float64 recomputation of L(x, r) (test/helpers/ballBound64.ts) agrees.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Matrix, SingularValueDecomposition } from "ml-matrix";
import { tf, useBackend } from "../../src/backend.ts";
import { ballNetwork, type BallInput, type BallNetwork } from "../../src/certify/ballNetwork.ts";
import { ballLayer } from "../../src/certify/ballLayers.ts";
import { certifyInput } from "../../src/certify/certify.ts";
import { evaluatedModel } from "../../src/pipelines/evaluatedModel.ts";
import { modelPreset, type VitConfig } from "../../src/nn/config.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import type { TextClassifier } from "../../src/nn/textClassifier.ts";
import { disposeTrace, type TracedLayer } from "../../src/nn/trace.ts";
import { apgdIn } from "../../src/robustness/apgd.ts";
import {
  embeddingBatch,
  imageBatch,
  NO_CLIP,
  type InputBatch,
} from "../../src/robustness/inputSpace.ts";
import { IMAGE_INPUTS, TEXT_INPUTS } from "../../src/robustness/modelInputs/index.ts";
import { resolveAttackOptions } from "../../src/robustness/options.ts";
import { pgdIn } from "../../src/robustness/pgd.ts";
import { inputJacobian } from "../../src/lipschitz/truth/inputJacobian.ts";
import { ballLipschitz64 } from "../helpers/ballBound64.ts";
import { gaussian, mulberry32 } from "../helpers/random.ts";
import { vitJacobians64 } from "../lipschitz/denseBlock64.ts";
import { headJacobian, randomHeadWeights } from "../lipschitz/rulesHelpers.ts";

await useBackend("wasm");

const MICRO = new URL("../../models/vit-micro-mnist/", import.meta.url).pathname;
const BERT = new URL("../fixtures/hf/bert-tiny-random/", import.meta.url).pathname;
const TEXTS = new URL("../fixtures/hf/texts.csv", import.meta.url).pathname;

function norm2(data: ArrayLike<number>, rows: number, cols: number): number {
  return new SingularValueDecomposition(Matrix.from1DArray(rows, cols, Array.from(data)), {
    autoTranspose: true,
  }).norm2;
}

/** A point at l_2 distance at most r from x (uniform direction; radius scaled by u^(1/D) or on the sphere). */
function inBall(rand: () => number, x: Float64Array, r: number, onSphere: boolean): Float64Array {
  const dir = Float64Array.from(x, () => gaussian(rand));
  const len = Math.hypot(...dir);
  const t = onSphere ? r : r * rand() ** (1 / x.length);
  return x.map((v, k) => v + (t * dir[k]) / len);
}

/** Projected onto the ball of radius r around x. */
function project(x: Float64Array, y: Float64Array, r: number): Float64Array {
  const dist = Math.hypot(...y.map((v, k) => v - x[k]));
  return dist <= r ? y : x.map((v, k) => v + ((y[k] - v) * r) / dist);
}

/**
 * The largest of f over the ball found by hill climbing: from the best of `starts` sampled
 * points, `steps` proposals of shrinking size, each kept when f grows.
 */
function maximise(
  rand: () => number,
  x: Float64Array,
  r: number,
  f: (y: Float64Array) => number,
  starts = 8,
  steps = 40,
): number {
  let best = x;
  let value = f(x);
  for (let s = 0; s < starts; s++) {
    const y = inBall(rand, x, r, true);
    const v = f(y);
    if (v > value) [best, value] = [y, v];
  }
  for (let k = 0; k < steps; k++) {
    const size = r * 0.5 ** (k / 10);
    const y = project(x, inBall(rand, best, size, true), r);
    const v = f(y);
    if (v > value) [best, value] = [y, v];
  }
  return value;
}

interface Case {
  model: TransformerClassifier;
  label: number;
  ball: BallInput;
  /** The tfjs input of one example (image [1, H, W, C]; text ids [1, n]) and its mask. */
  x: tf.Tensor;
  mask: tf.Tensor | null;
  net: BallNetwork;
}

function netOf(
  model: TransformerClassifier,
  x: tf.Tensor,
  mask: tf.Tensor | null,
  ball: BallInput,
): BallNetwork {
  const { logits, trace } = model.forward(x, { trace: true, mask });
  logits.dispose();
  try {
    return ballNetwork(model.config, model.getWeights(), trace!, ball, new Map());
  } finally {
    disposeTrace(trace);
  }
}

async function microCases(count: number): Promise<Case[]> {
  const { model, trained } = await evaluatedModel("test", MICRO, "vit-micro", 0);
  const inputs = await IMAGE_INPUTS.load(
    model,
    { who: "test", data: trained!.spec, trained, imported: false, seed: 0, n: count },
    {},
  );
  return Array.from({ length: count }, (_, i) => {
    const x = tf.slice(inputs.x, [i], [1]);
    const ball: BallInput = { kind: "image", pixels: Float64Array.from(x.dataSync()) };
    return {
      model,
      label: inputs.labels[i],
      ball,
      x,
      mask: null,
      net: netOf(model, x, null, ball),
    };
  });
}

async function bertCases(count: number): Promise<Case[]> {
  const { model, tokenizer, labels } = await evaluatedModel("test", BERT, "vit-micro", 0);
  const inputs = await TEXT_INPUTS.load(
    model,
    { who: "test", data: `csv:${TEXTS}`, trained: null, imported: true, seed: 0, n: count },
    { tokenizer, labels },
  );
  const tok = model.getWeights().get("tok")!;
  const d = model.config.dModel;
  return Array.from({ length: count }, (_, i) => {
    const n = inputs.x.shape[1] as number;
    const real = tf.slice(inputs.mask!, [i, 0], [1, n]).dataSync();
    let len = 1;
    for (let j = 0; j < n; j++) if (real[j] !== 0) len = j + 1;
    const x = tf.slice(inputs.x, [i, 0], [1, len]);
    const mask = tf.slice(inputs.mask!, [i, 0], [1, len]);
    const ids = x.dataSync();
    const tokens = Float64Array.from(
      { length: len * d },
      (_, t) => tok.data[ids[Math.floor(t / d)] * d + (t % d)],
    );
    const ball: BallInput = { kind: "embedding", tokens, n: len };
    return { model, label: inputs.labels[i], ball, x, mask, net: netOf(model, x, mask, ball) };
  });
}

const micro = await microCases(6);
const bert = await bertCases(3);

/**
 * Per input of `batch`, whether PGD (`seeds` runs of 50 steps from random starts) or APGD (100
 * steps, `restarts` runs) moved it to another prediction than `predictions` within the l_2 ball
 * of radius eps (no clipping: the whole ball).
 */
function attacksBreak(
  batch: InputBatch,
  kind: "image" | "embedding",
  predictions: number[],
  eps: number,
  seeds: number,
  restarts: number,
): boolean[] {
  const labels = tf.tensor1d(predictions, "int32");
  try {
    const runs: tf.Tensor[] = [];
    for (let seed = 0; seed < seeds; seed++) {
      const settings = resolveAttackOptions(
        { norm: "l2", eps, steps: 50, seed, clip: NO_CLIP },
        "test",
      );
      runs.push(pgdIn({ batch, kind, labels, settings, who: "pgd", onWarning: () => {} }));
    }
    if (restarts > 0) {
      const settings = resolveAttackOptions(
        { norm: "l2", eps, steps: 100, restarts, clip: NO_CLIP },
        "test",
      );
      runs.push(apgdIn({ batch, kind, labels, settings, who: "apgd", onWarning: () => {} }));
    }
    const broken = predictions.map(() => false);
    for (const adv of runs) {
      const z = tf.tidy(() => tf.argMax(batch.logits(adv), -1));
      const p = z.dataSync();
      z.dispose();
      predictions.forEach((c, i) => (broken[i] ||= p[i] !== c));
    }
    tf.dispose(runs);
    return broken;
  } finally {
    labels.dispose();
  }
}

/**
 * The images of `cases` as one batch whose ball of radius 1 is, for image i, its ball of radius
 * radii[i]: the model reads x_i + radii[i] (z - x_i). An attack with eps = 1 then searches every
 * image's own certified ball in one batch.
 */
function scaledImages(cases: Case[], radii: number[]): InputBatch {
  const model = cases[0].model;
  const x = tf.concat(cases.map((c) => c.x));
  const s = tf.tensor4d(radii, [radii.length, 1, 1, 1]);
  const scaled = Object.create(model) as TransformerClassifier;
  scaled.forward = (z, options) => {
    const y = tf.tidy(() => tf.add(x, tf.mul(tf.sub(z, x), s)));
    try {
      return model.forward(y, options);
    } finally {
      y.dispose();
    }
  };
  const batch = imageBatch(scaled, x, NO_CLIP);
  return { ...batch, dispose: () => tf.dispose([x, s]) };
}

test("(a) PGD and APGD with many steps and restarts change no prediction within its certified radius, and do far beyond it", () => {
  const certs = [...micro, ...bert].map((c) => ({
    c,
    cert: certifyInput(c.net, { norm: "l2", radii: [] }),
  }));
  // The larger of the two certified radii of each input (its ball holds the other's).
  const radius = (cert: ReturnType<typeof certifyInput>) =>
    Math.max(cert.rules.dist.radius, cert.rules.half.radius);
  const images = certs.filter(({ c, cert }) => c.mask === null && radius(cert) > 0);
  const texts = certs.filter(({ c, cert }) => c.mask !== null && radius(cert) > 0);
  assert.ok(
    images.length >= 4 && texts.length >= 1,
    `certified ${images.length} images and ${texts.length} texts`,
  );
  const predictions = images.map(({ cert }) => cert.prediction);
  const batch = scaledImages(
    images.map(({ c }) => c),
    images.map(({ cert }) => radius(cert)),
  );
  try {
    assert.deepEqual(
      attacksBreak(batch, "image", predictions, 1, 4, 4),
      predictions.map(() => false),
      "an attack changed a prediction within its certified radius",
    );
  } finally {
    batch.dispose();
  }
  for (const { c, cert } of texts) {
    const b = embeddingBatch(c.model as unknown as TextClassifier, { ids: c.x, mask: c.mask! });
    try {
      assert.deepEqual(
        attacksBreak(b, "embedding", [cert.prediction], radius(cert), 2, 2),
        [false],
        `an attack changed a text's prediction within ${radius(cert)}`,
      );
    } finally {
      b.dispose();
    }
  }
  // Far beyond the certified radii (l_2 3 in pixels) the same attacks do change predictions.
  const far = scaledImages(
    images.map(({ c }) => c),
    images.map(() => 3),
  );
  try {
    const brokenFar = attacksBreak(far, "image", predictions, 1, 1, 0).filter(Boolean).length;
    assert.ok(brokenFar >= 2, `the attacks broke only ${brokenFar} images at l_2 radius 3`);
  } finally {
    far.dispose();
  }
});

test("(b) the Jacobian norm at sampled and at maximised points of the ball never exceeds L(x, r) (vit-micro, float64 Jacobians)", () => {
  const rand = mulberry32(1);
  const cfg = micro[0].model.config as VitConfig;
  const weights = micro[0].model.getWeights();
  const pixels = 28 * 28;
  for (const c of micro.slice(0, 3)) {
    const x = (c.ball as { pixels: Float64Array }).pixels;
    const jac = (y: Float64Array) => {
      const j = vitJacobians64(cfg, weights, y);
      return norm2(j.network, j.classes, pixels);
    };
    const cert = certifyInput(c.net, { norm: "l2", radii: [] });
    for (const r of [cert.rules.dist.radius, 100 * cert.rules.dist.radius, 1e-2]) {
      for (const rule of ["dist", "half"] as const) {
        const L = c.net.lipschitz(r, rule);
        for (let k = 0; k < 6; k++) {
          const value = jac(inBall(rand, x, r, k % 2 === 0));
          assert.ok(value <= L, `||J|| = ${value} at a sampled point above L = ${L} (r ${r})`);
        }
        const found = maximise(rand, x, r, jac, 4, 16);
        assert.ok(found <= L, `||J|| = ${found} at a maximised point above L = ${L} (r ${r})`);
      }
    }
  }
});

test("(b) in token-embedding space too (BERT fixture, tfjs Jacobians at sampled and maximised points)", () => {
  const rand = mulberry32(2);
  for (const c of bert) {
    const tokens = (c.ball as { tokens: Float64Array }).tokens;
    const n = (c.ball as { n: number }).n;
    const d = c.model.config.dModel;
    const text = c.model as unknown as TextClassifier;
    // Copies of the one input in a batch: the mask tiled to them.
    const logits = (e: tf.Tensor) =>
      tf.tidy(
        () =>
          text.forwardFromEmbeddings(text.embedTokens(e), {
            mask: tf.tile(c.mask!, [e.shape[0] as number, 1]),
          }).logits,
      );
    const jac = (y: Float64Array) => {
      const e = tf.tensor3d(Float32Array.from(y), [1, n, d]);
      const j = inputJacobian(logits, e, c.model.config.classes);
      e.dispose();
      return norm2(j.data, j.rows, j.cols);
    };
    for (const r of [1e-6, 1e-3, 1e-1]) {
      const L = c.net.lipschitz(r, "dist");
      // float32 Jacobians: a relative slack of 1e-4 for their rounding.
      for (let k = 0; k < 4; k++) assert.ok(jac(inBall(rand, tokens, r, true)) <= L * (1 + 1e-4));
      assert.ok(maximise(rand, tokens, r, jac, 3, 10) <= L * (1 + 1e-4));
    }
  }
});

test("(b) an attention layer alone: its Jacobian norm at maximised points of its input ball stays below its factor", () => {
  const rand = mulberry32(3);
  for (let t = 0; t < 12; t++) {
    const n = 2 + (t % 3);
    const d = 4;
    const heads = 2;
    const dk = d / heads;
    const scale = [0.5, 2, 4][t % 3];
    const hw = Array.from({ length: heads }, () =>
      randomHeadWeights(rand, d, dk, scale, t % 2 === 0),
    );
    // The heads' columns assembled into the layer's [d, d] weights.
    const full = (pick: (h: number) => Float64Array) => {
      const out = new Float32Array(d * d);
      for (let h = 0; h < heads; h++)
        for (let a = 0; a < d; a++)
          for (let c = 0; c < dk; c++) out[a * d + h * dk + c] = pick(h)[a * dk + c];
      return { data: out, shape: [d, d] } as NamedArray;
    };
    const bias = (pick: (h: number) => Float64Array | undefined) =>
      hw[0].bq === undefined
        ? undefined
        : ({
            data: Float32Array.from(hw.flatMap((_, h) => Array.from(pick(h) as Float64Array))),
            shape: [d],
          } as NamedArray);
    const wo = {
      data: Float32Array.from({ length: d * d }, () => gaussian(rand) / Math.sqrt(d)),
      shape: [d, d],
    } as NamedArray;
    const weights = new Map<string, NamedArray>([
      ["a.wq", full((h) => hw[h].wq)],
      ["a.wk", full((h) => hw[h].wk)],
      ["a.wv", full((h) => hw[h].wv)],
      ["a.wo", wo],
      ["a.bo", { data: new Float32Array(d), shape: [d] }],
    ]);
    const bq = bias((h) => hw[h].bq);
    if (bq !== undefined) {
      weights.set("a.bq", bq);
      weights.set(
        "a.bk",
        bias((h) => hw[h].bk)!,
      );
      weights.set(
        "a.bv",
        bias((h) => hw[h].bv)!,
      );
    }
    // The float32 weights, as the layer reads them, for the oracle too.
    const f64 = (h: number, key: "wq" | "wk" | "wv" | "bq" | "bk" | "bv") => {
      const src = weights.get(`a.${key}`);
      if (src === undefined) return undefined;
      if (key.startsWith("b")) return Float64Array.from(src.data.subarray(h * dk, (h + 1) * dk));
      return Float64Array.from(
        { length: d * dk },
        (_, k) => src.data[Math.floor(k / dk) * d + h * dk + (k % dk)],
      );
    };
    const headW = Array.from({ length: heads }, (_, h) => ({
      d,
      dk,
      wq: f64(h, "wq")!,
      wk: f64(h, "wk")!,
      wv: f64(h, "wv")!,
      bq: f64(h, "bq"),
      bk: f64(h, "bk"),
      bv: f64(h, "bv"),
    }));
    const layer: TracedLayer = {
      kind: "attention",
      name: "a",
      input: null,
      params: {
        wq: "a.wq",
        wk: "a.wk",
        wv: "a.wv",
        wo: "a.wo",
        bo: "a.bo",
        ...(bq ? { bq: "a.bq", bk: "a.bk", bv: "a.bv" } : {}),
      },
      settings: { heads },
    };
    const x = Float64Array.from({ length: n * d }, () => gaussian(rand));
    const built = ballLayer(layer, x, n, d, { weights, cache: new Map() });
    // The layer's Jacobian [n d, n d]: the heads' Jacobians concatenated, times W_O.
    const jac = (y: Float64Array) => {
      const J = new Float64Array(n * d * n * d);
      for (let h = 0; h < heads; h++) {
        const Jh = headJacobian(y, n, headW[h]);
        for (let i = 0; i < n; i++)
          for (let c = 0; c < dk; c++)
            for (let col = 0; col < n * d; col++) {
              const v = Jh[(i * dk + c) * n * d + col];
              if (v !== 0)
                for (let e = 0; e < d; e++)
                  J[(i * d + e) * n * d + col] += v * wo.data[(h * dk + c) * d + e];
            }
      }
      return norm2(J, n * d, n * d);
    };
    for (const r of [0, 0.05, 0.5]) {
      for (const rule of ["dist", "half"] as const) {
        const bound = built.factor(r, rule);
        const found = r === 0 ? jac(x) : maximise(rand, x, r, jac, 6, 30);
        assert.ok(
          found <= bound * (1 + 1e-9),
          `layer Jacobian ${found} above its factor ${bound} (r ${r}, ${rule})`,
        );
      }
    }
  }
});

test("L(x, 0) is at least the true local constant at x, and L(x, r) grows with r", () => {
  const cfg = micro[0].model.config as VitConfig;
  const weights = micro[0].model.getWeights();
  for (const c of micro) {
    const j = vitJacobians64(cfg, weights, (c.ball as { pixels: Float64Array }).pixels);
    const truth = norm2(j.network, j.classes, j.pixels);
    for (const rule of ["dist", "half"] as const) {
      assert.ok(
        c.net.lipschitz(0, rule) >= truth,
        `L(x, 0) = ${c.net.lipschitz(0, rule)} below the true ${truth}`,
      );
      let last = 0;
      for (const r of [0, 1e-9, 1e-6, 1e-4, 1e-3, 1e-2, 0.05, 0.1]) {
        const L = c.net.lipschitz(r, rule);
        assert.ok(L >= last, `L fell from ${last} to ${L} at r ${r}`);
        last = L;
      }
    }
    assert.ok(
      c.net.lipschitz(0, "dist") < c.net.lipschitz(0, "half"),
      "the distribution-aware bound is below the 1/2 one",
    );
  }
});

test("(c) an independent float64 recomputation of L(x, r) agrees (trained vit-micro, and a post-LN ViT with exact GELU)", () => {
  const cases: {
    cfg: VitConfig;
    weights: Map<string, NamedArray>;
    image: Float64Array;
    net: BallNetwork;
  }[] = micro.slice(0, 3).map((c) => ({
    cfg: c.model.config as VitConfig,
    weights: c.model.getWeights(),
    image: (c.ball as { pixels: Float64Array }).pixels,
    net: c.net,
  }));
  const post = createModel(
    { ...modelPreset("vit-micro"), norm: "post", activation: "gelu-erf", heads: 4 },
    7,
  );
  const image = tf.randomUniform([1, 28, 28, 1], 0, 1, "float32", 5);
  const pixels = Float64Array.from(image.dataSync());
  cases.push({
    cfg: post.config as VitConfig,
    weights: post.getWeights(),
    image: pixels,
    net: netOf(post, image, null, { kind: "image", pixels }),
  });
  let compared = 0;
  for (const c of cases)
    for (const r of [0, 1e-6, 1e-4, 1e-3, 1e-2])
      for (const rule of ["dist", "half"] as const) {
        const mine = c.net.lipschitz(r, rule);
        const oracle = ballLipschitz64(c.cfg, c.weights, c.image, r, rule);
        if (!Number.isFinite(oracle)) {
          assert.equal(mine, oracle);
          continue;
        }
        compared++;
        assert.ok(
          Math.abs(mine - oracle) <= 1e-9 * oracle,
          `L(x, ${r}) ${rule}: ${mine} vs the float64 recomputation ${oracle}`,
        );
      }
  assert.ok(compared >= 30, `compared ${compared}`);
  image.dispose();
  post.dispose();
});
