// Kim et al.'s global bound of L2 attention (variant `kim`, src/lipschitz/rules/kim.ts; docs/math.md
// section 2, "L2 self-attention"): Lambert W, the bound against float64 Jacobian norms on random
// inputs at radii to 1e3 and on inputs found by gradient ascent, the L2 layer's local constant
// bounded in the radius where dot-product attention's grows, and `kim` in an L2 model's network
// bounds (the dot-product variants Infinity with the note; masked keys and dot-product layers
// refused; the L2 local variants: l2Local.test.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel, disposeTrace, multiHeadAttention } from "../../src/nn/index.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { kimHeadBound, kimPhiInverse } from "../../src/lipschitz/rules/kim.ts";
import { lambertW0 } from "../../src/lipschitz/rules/lambertW.ts";
import { KIM_MASKED, L2_NO_BOUND } from "../../src/lipschitz/layers/l2Attention.ts";
import { spectralNorm } from "../../src/lipschitz/linalg.ts";
import { denseLipschitz } from "../../src/lipschitz/truth/denseJacobian.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { l2Jacobian64, l2LocalLipschitz64 } from "../helpers/l2Jacobian64.ts";
import { l2AttentionLayer64 } from "../helpers/reference64.ts";
import { uniform } from "../nn/helpers.ts";

await useBackend("wasm");

/** Random L2-attention weights wq, wv, wo [d, d], bv, bo [d] (entries uniform in +-scale). */
function layerParams(d: number, seed: number, scale = 0.8): Record<string, NamedArray> {
  const w = (s: number, shape: number[]): NamedArray => ({
    data: uniform(shape[0] * (shape[1] ?? 1), s, -scale, scale),
    shape,
  });
  return {
    wq: w(seed, [d, d]),
    wv: w(seed + 1, [d, d]),
    wo: w(seed + 2, [d, d]),
    bv: w(seed + 3, [d]),
    bo: w(seed + 4, [d]),
  };
}

/**
 * Kim et al.'s Theorem 3.2 for the whole layer, written here from the statement (not through
 * src/lipschitz/rules/kim.ts): sqrt(N)/sqrt(d_k) (4 W_0((N-1)/e) + 1) sqrt(sum_h ||W^{Q,h}||^2
 * ||W^{V,h}||^2) ||W^O||.
 */
function kimLayer(n: number, heads: number, p: Record<string, NamedArray>): number {
  const d = p.wq.shape[0];
  const dk = d / heads;
  const cols = (m: NamedArray, h: number) =>
    Float64Array.from(
      { length: d * dk },
      (_, k) => m.data[Math.floor(k / dk) * d + h * dk + (k % dk)],
    );
  let s = 0;
  for (let h = 0; h < heads; h++)
    s += (spectralNorm(cols(p.wq, h), d, dk) ** 2 * spectralNorm(cols(p.wv, h), d, dk)) ** 2;
  const phiInv = lambertW0((n - 1) / Math.E);
  return (
    (Math.sqrt(n) / Math.sqrt(dk)) * (4 * phiInv + 1) * Math.sqrt(s) * spectralNorm(p.wo.data, d, d)
  );
}

test("lambertW0 solves w e^w = x; kimPhiInverse solves x e^(x+1) = N - 1; bad arguments are named", () => {
  assert.equal(lambertW0(0), 0);
  assert.ok(Math.abs(lambertW0(Math.E) - 1) < 1e-15);
  for (const x of [1e-12, 1e-3, 0.3, 1, 2.5, 10, 1e3, 1e8, 1e300]) {
    const w = lambertW0(x);
    const residual =
      x < 1e300 ? Math.abs(w * Math.exp(w) - x) / x : Math.abs(w + Math.log(w) - Math.log(x));
    assert.ok(residual <= 1e-14, `x = ${x}, w = ${w}: residual ${residual}`);
  }
  for (const n of [1, 2, 3, 16, 197, 1e6]) {
    const y = kimPhiInverse(n);
    assert.ok(Math.abs(y * Math.exp(y + 1) - (n - 1)) <= 1e-12 * Math.max(1, n), `N = ${n}`);
  }
  assert.throws(() => lambertW0(-1), /lambertW0: x must be finite and >= 0, got -1/);
  assert.throws(() => kimPhiInverse(0), /kimPhiInverse: n must be >= 1/);
  assert.throws(() => kimHeadBound(4, 2, -1, 1), /kimHeadBound: normWq must be finite/);
  // One token: f = x A W_V, so the bound is ||W_Q||^2 ||W_V|| / sqrt(d_k) exactly.
  assert.equal(kimHeadBound(1, 4, 1, 1), 0.5);
});

test("the float64 Jacobian helper equals central differences of the float64 forward pass", () => {
  const d = 4;
  const n = 5;
  const p = layerParams(d, 40);
  const x = Float64Array.from(uniform(n * d, 41, -1, 1));
  const J = l2Jacobian64(x, n, 2, p);
  const h = 1e-6;
  let diff = 0;
  for (let c = 0; c < n * d; c++) {
    const plus = Float64Array.from(x);
    const minus = Float64Array.from(x);
    plus[c] += h;
    minus[c] -= h;
    const a = l2AttentionLayer64(plus, n, 2, p).out;
    const b = l2AttentionLayer64(minus, n, 2, p).out;
    for (let r = 0; r < n * d; r++)
      diff = Math.max(diff, Math.abs(J[r * n * d + c] - (a[r] - b[r]) / (2 * h)));
  }
  assert.ok(diff < 1e-7, `max |J - J_fd| = ${diff}`);
});

test("kim >= ||Df(X)|| of L2 attention on random inputs: 60 seeds, N 1..16, radii 1..1e3", () => {
  const ratios: number[] = [];
  for (let seed = 0; seed < 60; seed++) {
    const heads = seed % 2 === 0 ? 2 : 1;
    const d = heads === 2 ? 4 : 3;
    const n = 1 + (seed % 16);
    const p = layerParams(d, 100 + 7 * seed, 0.4 + (seed % 5) * 0.3);
    const kim = kimLayer(n, heads, p);
    const base = uniform(n * d, 500 + seed, -1, 1);
    for (const r of [1, 10, 100, 1e3]) {
      // Radius r, and inputs whose tokens cluster (pairs within 1 of each other) at radius r.
      const spread = Float64Array.from(base, (v) => r * v);
      const clustered = Float64Array.from(
        base,
        (v, k) => r * base[(Math.floor(k / d) >> 1) * d + (k % d)] + v,
      );
      for (const x of [spread, clustered]) {
        const truth = l2LocalLipschitz64(x, n, heads, p);
        assert.ok(
          truth <= kim * (1 + 1e-9),
          `seed ${seed}, N ${n}, r ${r}: true ${truth} > kim ${kim}`,
        );
        ratios.push(kim / truth);
      }
    }
  }
  console.log(
    `  kim / true on random inputs: min ${Math.min(...ratios).toFixed(2)}, max ${Math.max(...ratios).toExponential(2)}`,
  );
});

test("kim >= ||Df(X)|| at inputs found by gradient ascent on the Jacobian norm (a lower estimate of the global constant)", () => {
  const ratios: number[] = [];
  for (let seed = 0; seed < 6; seed++) {
    const heads = seed < 2 ? 1 : 2;
    const d = heads === 1 ? 3 : 4;
    const n = [2, 3, 2, 4, 8, 6][seed];
    const p = layerParams(d, 900 + 11 * seed, 0.9);
    const kim = kimLayer(n, heads, p);
    const f = (x: Float64Array) => l2LocalLipschitz64(x, n, heads, p);
    let x = Float64Array.from(uniform(n * d, 950 + seed, -1, 1));
    let value = f(x);
    let step = 0.3;
    for (let it = 0; it < 40; it++) {
      // Central-difference gradient of ||Df(X)||, a normalised step, kept only when it climbs.
      const g = new Float64Array(n * d);
      for (let c = 0; c < n * d; c++) {
        const plus = Float64Array.from(x);
        const minus = Float64Array.from(x);
        plus[c] += 1e-5;
        minus[c] -= 1e-5;
        g[c] = (f(plus) - f(minus)) / 2e-5;
      }
      const norm = Math.hypot(...g) || 1;
      const next = Float64Array.from(x, (v, c) => v + (step * g[c]) / norm);
      const nv = f(next);
      if (nv > value) {
        x = next;
        value = nv;
        step *= 1.2;
      } else step /= 2;
      assert.ok(value <= kim * (1 + 1e-9), `seed ${seed}: ascent reached ${value} > kim ${kim}`);
    }
    ratios.push(kim / value);
  }
  console.log(
    `  kim / (gradient-ascent maximum of ||Df||): ${ratios.map((r) => r.toFixed(2)).join(", ")}`,
  );
});

test("L2 attention's local constant stays bounded as the radius grows; dot-product attention's grows (Kim et al. Theorem 3.1)", () => {
  const d = 4;
  const heads = 2;
  const n = 4;
  const p = layerParams(d, 70);
  const kim = kimLayer(n, heads, p);
  // Kim et al.'s construction for dot-product attention: one token at 0 (its scores are all 0, so
  // its softmax row stays uniform) and the others at radius r.
  const u = uniform(n * d, 71, -1, 1);
  const at = (r: number) => Float64Array.from(u, (v, k) => (k < d ? 0 : r * v));
  const radii = [1, 10, 100, 1e3];
  const l2 = radii.map((r) => l2LocalLipschitz64(at(r), n, heads, p));
  const t = (m: NamedArray) => tf.tensor(m.data, m.shape);
  const dotParams = { wq: t(p.wq), wk: t(p.wq), wv: t(p.wv), wo: t(p.wo), bo: t(p.bo) };
  const dot = radii.map((r) => {
    const x = tf.tensor3d(Float32Array.from(at(r)), [1, n, d]);
    const v = denseLipschitz((z) => multiHeadAttention(z, dotParams, heads).out, x);
    x.dispose();
    return v;
  });
  tf.dispose(Object.values(dotParams));
  const msg = `L2 ${l2.map((v) => v.toPrecision(3)).join(", ")} (kim ${kim.toPrecision(3)}); dot ${dot.map((v) => v.toPrecision(3)).join(", ")}`;
  console.log(`  ||Df|| at radii 1, 10, 100, 1e3: ${msg}`);
  assert.ok(
    l2.every((v) => v <= kim),
    msg,
  );
  assert.ok(dot[3] > 1e4 * dot[0] && dot[3] > 100 * kim, msg);
});

test("an L2 model: kim for its attention, blocks and network (>= the true values), the dot-product variants Infinity with the note", () => {
  const model = createModel("vit-micro-l2", 2);
  const x = tf.randomUniform([1, 28, 28, 1], 0, 1, "float32", 3);
  const { logits, trace } = model.forward(x, { trace: true });
  logits.dispose();
  const report = networkBounds(model, trace!);
  assert.deepEqual(report.variants, [...HEAD_VARIANTS, "l2-dist", "l2-cov", "kim"]);
  const ex = report.examples[0];
  const attnInput = trace!.blocks[0].attnInput;
  const weights = model.getWeights();
  const p = Object.fromEntries(
    ["wq", "wv", "wo", "bo"].map((r) => [r, weights.get(`blocks.0.attn.${r}`)!]),
  );
  const n = attnInput.shape[1] as number;
  for (const v of HEAD_VARIANTS) {
    assert.equal(ex.network[v], Infinity, v);
    assert.equal(ex.blocks[0].attention[v], Infinity, v);
    for (const h of ex.blocks[0].heads) assert.equal(h.values[v], Infinity);
  }
  const kim = ex.blocks[0].attention.kim;
  assert.ok(Math.abs(kim - kimLayer(n, 2, p)) <= 1e-12 * kim, `${kim} vs ${kimLayer(n, 2, p)}`);
  // Above the attention layer's true value at this input (float64 Jacobian of the traced input).
  const xa = Float64Array.from(attnInput.dataSync());
  assert.ok(kim >= l2LocalLipschitz64(xa, n, 2, p), "kim >= the attention layer's true value");
  // Composed: pre-LN block (1 + kim L_LN1)(1 + L_MLP L_LN2), and the network >= its exact value.
  assert.ok(Number.isFinite(ex.network.kim) && ex.blocks[0].block.kim > 1 + kim * ex.blocks[0].ln1);
  const netTrue = networkLipschitz(model, x)[0];
  assert.ok(ex.network.kim >= netTrue, `network kim ${ex.network.kim} vs true ${netTrue}`);
  const attn = ex.layers[1].children[0].children[1];
  assert.equal(attn.kind, "l2Attention");
  assert.equal((attn.detail as { note: string }).note, L2_NO_BOUND);
  disposeTrace(trace);
  x.dispose();
  model.dispose();
});

test("kim is refused for dot-product attention (not globally Lipschitz) and Infinity for masked L2 attention", () => {
  const dot = createModel("vit-micro", 2);
  const x = tf.randomUniform([1, 28, 28, 1], 0, 1, "float32", 3);
  const a = dot.forward(x, { trace: true });
  assert.equal(
    networkBounds(dot, a.trace!).variants.includes("kim"),
    false,
    "not in the default list",
  );
  assert.throws(
    () => networkBounds(dot, a.trace!, { variants: ["kim"] }),
    /blocks\.0\.attn: variant "kim" .* dot-product attention is not globally Lipschitz \(Kim et al\. Theorem 3\.1\)/,
  );
  disposeTrace(a.trace);
  a.logits.dispose();
  dot.dispose();
  x.dispose();
  const text = createModel(
    {
      kind: "text",
      vocabSize: 30,
      maxLength: 6,
      dModel: 8,
      heads: 2,
      blocks: 1,
      mlpHidden: 16,
      classes: 2,
      attention: "l2",
    },
    4,
  );
  const ids = tf.tensor2d([3, 1, 4, 1, 0, 0], [1, 6], "int32");
  const mask = tf.tensor2d([1, 1, 1, 1, 0, 0], [1, 6], "int32");
  const t = text.forward(ids, { trace: true, mask });
  const ex = networkBounds(text, t.trace!).examples[0];
  assert.equal(ex.blocks[0].attention.kim, Infinity);
  assert.equal(ex.network.kim, Infinity);
  const attn = ex.layers
    .flatMap((l) => l.children)
    .flatMap((l) => l.children)
    .find((l) => l.kind === "l2Attention");
  assert.equal((attn?.detail as { note: string }).note, KIM_MASKED);
  disposeTrace(t.trace);
  t.logits.dispose();
  tf.dispose([ids, mask]);
  text.dispose();
});
