// The local bounds of L2 attention (variants `l2-dist`, `l2-cov`; src/lipschitz/rules/l2Head.ts,
// docs/math.md section 2, "Local bounds of L2 attention"): never below the float64 dense-Jacobian
// truth of the head and of the layer on random inputs (radii to 1e3, padded and causal masks,
// 1-2 heads), l2-cov <= l2-dist, how often they beat `kim`, their ratio on a model's traced
// input, the network values above the exact network constant, and refusal by dot-product layers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel, disposeTrace } from "../../src/nn/index.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import {
  HEAD_VARIANTS,
  L2_LOCAL_DOT_REFUSED,
  type HeadVariant,
} from "../../src/lipschitz/rules/attentionHead.ts";
import { l2HeadBounds, l2HeadWeights } from "../../src/lipschitz/rules/l2Head.ts";
import {
  KIM_MASKED,
  L2_NO_BOUND,
  l2AttentionKind,
  type L2Prepared,
} from "../../src/lipschitz/layers/l2Attention.ts";
import type { LayerView } from "../../src/lipschitz/layers/types.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { l2LocalLipschitz64 } from "../helpers/l2Jacobian64.ts";
import { l2AttentionLayer64 } from "../helpers/reference64.ts";
import { uniform } from "../nn/helpers.ts";

await useBackend("wasm");

const LOCAL = ["l2-dist", "l2-cov"] as const;
const TOL = 1e-9;

/** Random L2-attention weights wq, wv, wo [d, d], bv, bo [d] (entries uniform in +-scale). */
function layerParams(d: number, seed: number, scale: number): Record<string, NamedArray> {
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

/** The L2 kind's rule on one sequence x [n, d] (a minimal LayerView). */
function kindRule(
  x: Float64Array,
  n: number,
  heads: number,
  params: Record<string, NamedArray>,
  allowed: Uint8Array | undefined,
  variants: readonly HeadVariant[] = [...LOCAL, "kim"],
) {
  const d = params.wq.shape[0];
  const settings = { heads };
  const prepared = l2AttentionKind.prepare!(params, settings, "attn");
  const p = l2AttentionLayer64(x, n, heads, params, allowed).p;
  const layer = {
    kind: "l2Attention",
    name: "attn",
    input: { data: x, shape: [n, d] },
    params,
    extras: { p: { data: p, shape: [heads, n, n] } },
    settings,
    mask: allowed === undefined ? {} : { allowed },
    prepared,
    options: { mlp: "local", variants },
  } as unknown as LayerView<L2Prepared>;
  return l2AttentionKind.rule(layer) as {
    value: Record<string, number>;
    detail: { heads: { values: Record<string, number> }[]; note: string };
  };
}

/** W_O that keeps head h's columns only: the layer's Jacobian is then head h's. */
function headSelector(d: number, dk: number, h: number): NamedArray {
  const data = new Float32Array(d * d);
  for (let a = 0; a < dk; a++) data[(h * dk + a) * d + h * dk + a] = 1;
  return { data, shape: [d, d] };
}

/** One random case of the sweep: seed -> sizes, weights, input and mask. */
function randomCase(seed: number) {
  const heads = seed % 3 === 0 ? 1 : 2;
  const d = heads === 2 ? 4 : 2 + (seed % 2);
  const n = 1 + (seed % 12);
  const params = layerParams(d, 1000 + 11 * seed, 0.3 + (seed % 5) * 0.35);
  const radius = [0.1, 1, 3, 10, 100, 1e3][Math.floor(seed / 5) % 6];
  const base = uniform(n * d, 5000 + seed, -1, 1);
  // Half the cases cluster the tokens in pairs (within 1 of each other) at the radius: the rows
  // stay soft there, where spread tokens at a large radius give one-hot rows.
  const clustered = Math.floor(seed / 30) % 2 === 1;
  const x = Float64Array.from(base, (v, k) =>
    clustered ? radius * base[(Math.floor(k / d) >> 1) * d + (k % d)] + v : radius * v,
  );
  // Masks: padded keys (the last tokens are padding; every row attends to the real ones, padded
  // rows included, as this package masks padding), causal, or none.
  let allowed: Uint8Array | undefined;
  const kind = seed % 4;
  if (kind === 1 && n > 1) {
    const real = 1 + ((seed >> 2) % (n - 1));
    allowed = new Uint8Array(n * n);
    for (let i = 0; i < n; i++) for (let j = 0; j < real; j++) allowed[i * n + j] = 1;
  } else if (kind === 2 && n > 1) {
    allowed = new Uint8Array(n * n);
    for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) allowed[i * n + j] = 1;
  }
  return { heads, d, n, params, radius, x, allowed };
}

const stats = (a: number[]) => {
  const s = [...a].sort((u, v) => u - v);
  return `min ${s[0].toPrecision(4)}, median ${s[s.length >> 1].toPrecision(4)}, max ${s[s.length - 1].toPrecision(4)}`;
};

test("l2-dist and l2-cov >= the dense-Jacobian truth of every head and of the layer: 1,200 random cases (n 1..12, radii 0.1..1e3, padded and causal masks, 1-2 heads); l2-cov <= l2-dist", () => {
  const ratios: Record<string, number[]> = { "l2-dist": [], "l2-cov": [], kim: [] };
  const headRatios: Record<string, number[]> = { "l2-dist": [], "l2-cov": [] };
  let unmasked = 0;
  const beatKim = { "l2-dist": 0, "l2-cov": 0 };
  let cases = 0;
  let headCases = 0;
  for (let seed = 0; seed < 1200; seed++) {
    const { heads, d, n, params, radius, x, allowed } = randomCase(seed);
    const dk = d / heads;
    const r = kindRule(x, n, heads, params, allowed);
    const truth = l2LocalLipschitz64(x, n, heads, params, allowed);
    const where = `seed ${seed} (n ${n}, heads ${heads}, radius ${radius}, mask ${allowed ? "yes" : "no"})`;
    for (const v of LOCAL) {
      assert.ok(
        r.value[v] >= truth * (1 - TOL),
        `${where}: layer ${v} ${r.value[v]} < true ${truth}`,
      );
      ratios[v].push(r.value[v] / truth);
    }
    assert.ok(r.value["l2-cov"] <= r.value["l2-dist"] * (1 + 1e-12), `${where}: cov > dist`);
    if (allowed === undefined || allowed.every((a) => a)) {
      unmasked++;
      ratios.kim.push(r.value.kim / truth);
      for (const v of LOCAL) if (r.value[v] < r.value.kim) beatKim[v]++;
    } else assert.equal(r.value.kim, Infinity);
    // Each head against its own Jacobian (W_O selecting its columns).
    for (let h = 0; h < heads; h++) {
      const ht = l2LocalLipschitz64(
        x,
        n,
        heads,
        { ...params, wo: headSelector(d, dk, h) },
        allowed,
      );
      for (const v of LOCAL) {
        const b = r.detail.heads[h].values[v];
        assert.ok(b >= ht * (1 - TOL), `${where}, head ${h}: ${v} ${b} < true ${ht}`);
        if (ht > 0) headRatios[v].push(b / ht);
      }
      headCases++;
    }
    cases++;
  }
  assert.ok(cases >= 1000 && headCases >= 1000);
  for (const v of LOCAL) {
    console.log(`  layer ${v} / true (${cases}): ${stats(ratios[v])}`);
    console.log(`  head ${v} / true (${headCases}): ${stats(headRatios[v])}`);
    console.log(
      `  layer ${v} < kim on ${beatKim[v]} of ${unmasked} unmasked cases (${((100 * beatKim[v]) / unmasked).toFixed(1)}%)`,
    );
  }
  console.log(`  layer kim / true (${unmasked} unmasked): ${stats(ratios.kim)}`);
});

test("l2HeadBounds: one token gives the exact value ||A W_V||; a soft row's query path is exact on a head with n = 2", () => {
  const d = 3;
  const w = uniform(d * d, 7, -1, 1);
  const wv = uniform(d * d, 8, -1, 1);
  const hw = l2HeadWeights(w, wv, d, d);
  const r1 = l2HeadBounds({ n: 1, q: [0.3, -0.2, 0.5], p: [1] }, hw);
  assert.equal(r1.values["l2-cov"], hw.awv);
  assert.equal(r1.values["l2-dist"], hw.awv);
  // The bounds are never below the truth of the single head (heads = 1, W_O = I).
  const params = {
    wq: { data: w, shape: [d, d] },
    wv: { data: wv, shape: [d, d] },
    wo: headSelector(d, d, 0),
    bo: { data: new Float32Array(d), shape: [d] },
  };
  for (const radius of [0.2, 0.7, 2]) {
    const x = Float64Array.from(uniform(2 * d, 9, -radius, radius));
    const r = kindRule(x, 2, 1, params, undefined, ["l2-cov"]);
    const truth = l2LocalLipschitz64(x, 2, 1, params);
    assert.ok(r.value["l2-cov"] >= truth * (1 - TOL), `radius ${radius}`);
    assert.ok(r.value["l2-cov"] <= 3 * truth, `radius ${radius}: ${r.value["l2-cov"]} vs ${truth}`);
  }
  assert.throws(() => l2HeadBounds({ n: 2, q: [1, 2], p: [1, 0, 0, 1] }, hw), /q must have/);
});

test("an L2 model's traced input: l2-cov of each attention layer within a modest factor of its true value; block and network values >= the true ones; the note", () => {
  const model = createModel("vit-micro-l2", 2);
  const x = tf.randomUniform([3, 28, 28, 1], 0, 1, "float32", 5);
  const { logits, trace } = model.forward(x, { trace: true });
  logits.dispose();
  const report = networkBounds(model, trace!);
  assert.deepEqual(report.variants, [...HEAD_VARIANTS, "l2-dist", "l2-cov", "kim"]);
  const weights = model.getWeights();
  const netTrue = networkLipschitz(model, x);
  const heads = model.config.heads;
  const ratios: Record<string, number[]> = { "l2-dist": [], "l2-cov": [], kim: [] };
  report.examples.forEach((ex, e) => {
    for (const [b, blk] of trace!.blocks.entries()) {
      const attnInput = blk.attnInput;
      const [, n, d] = attnInput.shape as number[];
      const xa = Float64Array.from(attnInput.dataSync().subarray(e * n * d, (e + 1) * n * d));
      const p = Object.fromEntries(
        ["wq", "wv", "wo", "bo"].map((r) => [r, weights.get(`blocks.${b}.attn.${r}`)!]),
      );
      const truth = l2LocalLipschitz64(xa, n, heads, p);
      for (const v of ["l2-dist", "l2-cov", "kim"] as const) {
        const bound = ex.blocks[b].attention[v];
        assert.ok(bound >= truth * (1 - TOL), `example ${e} block ${b}: ${v} ${bound} < ${truth}`);
        ratios[v].push(bound / truth);
      }
    }
    for (const v of LOCAL) {
      assert.ok(Number.isFinite(ex.network[v]));
      assert.ok(ex.network[v] >= netTrue[e], `network ${v} ${ex.network[v]} < ${netTrue[e]}`);
    }
    for (const v of HEAD_VARIANTS) assert.equal(ex.network[v], Infinity, v);
  });
  for (const v of Object.keys(ratios))
    console.log(`  vit-micro-l2 (untrained) attention ${v} / true: ${stats(ratios[v])}`);
  const median = [...ratios["l2-cov"]].sort((a, b) => a - b)[ratios["l2-cov"].length >> 1];
  assert.ok(median <= 10, `median l2-cov / true ${median}`);
  const attn = report.examples[0].layers[1].children[0].children[1];
  assert.equal(attn.kind, "l2Attention");
  assert.equal((attn.detail as { note: string }).note, L2_NO_BOUND);
  disposeTrace(trace);
  x.dispose();
  model.dispose();
});

test("a masked L2 text model: l2-dist and l2-cov finite and >= the attention layer's true value (kim Infinity); dot-product layers refuse the L2 local variants", () => {
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
  const attnInput = t.trace!.blocks[0].attnInput;
  const n = 6;
  const allowed = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) for (let j = 0; j < 4; j++) allowed[i * n + j] = 1;
  const weights = text.getWeights();
  const p = Object.fromEntries(
    ["wq", "wv", "wo", "bo"].map((r) => [r, weights.get(`blocks.0.attn.${r}`)!]),
  );
  const truth = l2LocalLipschitz64(Float64Array.from(attnInput.dataSync()), n, 2, p, allowed);
  for (const v of LOCAL) {
    const b = ex.blocks[0].attention[v];
    assert.ok(Number.isFinite(b) && b >= truth * (1 - TOL), `${v} ${b} vs true ${truth}`);
    assert.ok(Number.isFinite(ex.network[v]));
  }
  assert.equal(ex.blocks[0].attention.kim, Infinity);
  const attn = ex.layers
    .flatMap((l) => l.children)
    .flatMap((l) => l.children)
    .find((l) => l.kind === "l2Attention");
  assert.equal((attn?.detail as { note: string }).note, KIM_MASKED);
  disposeTrace(t.trace);
  t.logits.dispose();
  tf.dispose([ids, mask]);
  text.dispose();

  const dot = createModel("vit-micro", 2);
  const x = tf.randomUniform([1, 28, 28, 1], 0, 1, "float32", 3);
  const a = dot.forward(x, { trace: true });
  assert.equal(networkBounds(dot, a.trace!).variants.includes("l2-cov"), false);
  const escaped = L2_LOCAL_DOT_REFUSED.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  for (const v of LOCAL)
    assert.throws(
      () => networkBounds(dot, a.trace!, { variants: [v] }),
      new RegExp(`blocks\\.0\\.attn: ${escaped}`),
    );
  disposeTrace(a.trace);
  a.logits.dispose();
  dot.dispose();
  x.dispose();
});
