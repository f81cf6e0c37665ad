// The layer table's public registration: a toy layer kind (RMSNorm, and a scaling layer) added
// through registerLayerKind, run by forwardLayers in a small model with built-in kinds, and
// bounded by networkBounds above the true local constant from the dense Jacobian
// (src/lipschitz/truth/denseJacobian.ts). Also: a trace built by forwardLayers from the
// built-in kinds gives the classifier's own block bounds.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import {
  createModel,
  disposeTrace,
  ParamStore,
  traceTensors,
  type LayerTrace,
} from "../../src/nn/index.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import {
  forwardLayers,
  input,
  layerKind,
  layerKinds,
  registerLayerKind,
  setting,
  unregisterLayerKind,
  type LayerDecl,
  type LayerKindSpec,
} from "../../src/lipschitz/layers/index.ts";
import { denseLipschitz } from "../../src/lipschitz/truth/denseJacobian.ts";
import { mulberry32, normals, pick } from "./rulesHelpers.ts";

before(async () => {
  await useBackend("cpu");
});

/**
 * RMSNorm y = g * x / sqrt(mean(x^2) + eps) per row. Row Jacobian
 * diag(g) (I - x x^T / (d (ms + eps))) / sqrt(ms + eps); the middle factor has eigenvalues 1 and
 * eps / (ms + eps), so the row's constant is at most max|g| / sqrt(ms + eps): max over rows.
 */
const rmsNormKind: LayerKindSpec<number> = {
  kind: "rmsNorm",
  params: { required: ["gamma"] },
  forward: (x, ctx) => ({
    out: tf.tidy(() => {
      const eps = setting(ctx.settings, "eps", "rmsNorm") as number;
      const ms = tf.mean(tf.square(x), -1, true);
      return tf.mul(tf.mul(x, tf.rsqrt(tf.add(ms, eps))), ctx.params.gamma);
    }),
  }),
  reference64(x, shape, params, settings) {
    const d = shape[shape.length - 1];
    const rows = x.length / d;
    const eps = settings.eps as number;
    const y = new Float64Array(x.length);
    for (let r = 0; r < rows; r++) {
      let ms = 0;
      for (let i = 0; i < d; i++) ms += x[r * d + i] ** 2 / d;
      for (let i = 0; i < d; i++)
        y[r * d + i] = (params.gamma.data[i] * x[r * d + i]) / Math.sqrt(ms + eps);
    }
    return y;
  },
  prepare: (params) => params.gamma.data.reduce((m, g) => Math.max(m, Math.abs(g)), 0),
  rule(layer) {
    const x = input(layer);
    const d = x.shape[x.shape.length - 1];
    const eps = setting(layer.settings, "eps", layer.name) as number;
    let worst = 0;
    for (let r = 0; r < x.data.length / d; r++) {
      let ms = 0;
      for (let i = 0; i < d; i++) ms += x.data[r * d + i] ** 2 / d;
      worst = Math.max(worst, layer.prepared / Math.sqrt(ms + eps));
    }
    return { value: worst };
  },
};

/** y = alpha x with a learned scalar alpha [1]: exactly |alpha|. */
const scaleKind: LayerKindSpec = {
  kind: "scale",
  params: { required: ["alpha"] },
  forward: (x, ctx) => ({ out: tf.mul(x, ctx.params.alpha) }),
  reference64: (x, _shape, params) => x.map((v) => v * params.alpha.data[0]),
  rule: (layer) => ({ value: Math.abs(layer.params.alpha.data[0]) }),
};

function withToyKinds(fn: () => void): void {
  registerLayerKind(rmsNormKind);
  registerLayerKind(scaleKind);
  try {
    fn();
  } finally {
    unregisterLayerKind("rmsNorm");
    unregisterLayerKind("scale");
  }
}

test("registering a kind: duplicates and built-in removal are refused, the kind is listed", () => {
  withToyKinds(() => {
    assert.ok(layerKinds().includes("rmsNorm") && layerKinds().includes("scale"));
    assert.equal(layerKind("rmsNorm"), rmsNormKind as unknown as LayerKindSpec);
    assert.throws(() => registerLayerKind(scaleKind), /already registered/);
    assert.throws(() => unregisterLayerKind("layerNorm"), /built-in/);
  });
  assert.ok(!layerKinds().includes("rmsNorm"));
  assert.throws(() => layerKind("rmsNorm"), /known kinds/);
});

test("a toy model with RMSNorm and a scaled residual attention branch: networkBounds >= the dense-Jacobian truth (40 cases)", () => {
  withToyKinds(() => {
    const rand = mulberry32(81);
    const before = tf.memory().numTensors;
    for (let t = 0; t < 40; t++) {
      const heads = pick(rand, [1, 2]);
      const d = heads * pick(rand, [2, 3]);
      const n = 2 + Math.floor(rand() * 3);
      const classes = 3;
      const eps = pick(rand, [1e-5, 1e-2]);
      const store = new ParamStore(t);
      const scale = pick(rand, [0.3, 1, 2]);
      store.add("norm1.gamma", [d], { kind: "normal", std: scale }, "norm");
      store.add("s.alpha", [1], { kind: "normal", std: 1 }, "weight");
      for (const m of ["wq", "wk", "wv", "wo"])
        store.add(`attn.${m}`, [d, d], { kind: "normal", std: scale / Math.sqrt(d) }, "weight");
      for (const m of ["bq", "bk", "bv", "bo"])
        store.add(`attn.${m}`, [d], { kind: "normal", std: 0.3 }, "bias");
      store.add("out.w", [d, classes], { kind: "glorot", fanIn: d, fanOut: classes }, "weight");
      store.add("out.b", [classes], { kind: "zeros" }, "bias");
      const decls: LayerDecl[] = [
        { kind: "rmsNorm", name: "norm1", settings: { eps } },
        {
          kind: "residual",
          name: "res",
          children: [
            { kind: "scale", name: "s" },
            { kind: "attention", name: "attn", settings: { heads } },
          ],
        },
        { kind: "linear", name: "out" },
      ];
      const x = tf.tensor3d(Float32Array.from(normals(rand, n * d, pick(rand, [0.5, 2]))), [
        1,
        n,
        d,
      ]);
      const trace: LayerTrace = { layers: [], mask: null, allowed: null };
      const out = tf.tidy(() => {
        const r = forwardLayers(x, decls, store);
        trace.layers = r.layers;
        for (const tensor of traceTensors(trace)) tf.keep(tensor);
        return r.out;
      });
      assert.deepEqual(out.shape, [1, n, classes]);
      // The toy kind's tfjs forward agrees with its float64 reference.
      const w = store.getWeights();
      const rms = trace.layers[0];
      const ref = rmsNormKind.reference64!(
        Float64Array.from(x.dataSync()),
        [n, d],
        { gamma: w.get("norm1.gamma") as NamedArray },
        { eps },
      );
      const got = trace.layers[1].input!.dataSync();
      for (let i = 0; i < ref.length; i++)
        assert.ok(Math.abs(got[i] - ref[i]) <= 1e-4 * (1 + Math.abs(ref[i])));
      assert.equal(rms.kind, "rmsNorm");
      const truth = denseLipschitz((z) => forwardLayers(z, decls, store).out, x);
      const nb = networkBounds({ weights: w }, trace);
      const ex = nb.examples[0];
      assert.deepEqual(
        ex.layers.map((l) => [l.kind, l.name]),
        [
          ["rmsNorm", "norm1"],
          ["residual", "res"],
          ["linear", "out"],
        ],
      );
      assert.equal(ex.layers[0].shared, ex.layers[0].values.paper);
      assert.equal(ex.layers[1].children.length, 2);
      assert.equal(ex.blocks.length, 0);
      for (const name of HEAD_VARIANTS) {
        assert.ok(Number.isFinite(ex.network[name]), name);
        assert.ok(
          ex.network[name] >= truth * (1 - 1e-4),
          `case ${t}: ${name} ${ex.network[name]} < ${truth}`,
        );
      }
      out.dispose();
      x.dispose();
      disposeTrace(trace);
      store.dispose();
    }
    assert.equal(tf.memory().numTensors, before);
  });
});

test("forwardLayers over the built-in kinds, declared as a classifier's block, gives the classifier's block bounds", () => {
  for (const norm of ["pre", "post"] as const) {
    const model = createModel({
      kind: "vit",
      imageSize: 4,
      channels: 1,
      patchSize: 2,
      dModel: 4,
      heads: 2,
      blocks: 1,
      mlpHidden: 6,
      classes: 2,
      norm,
      qkvBias: true,
    });
    const x = tf.tensor2d(
      Float32Array.from({ length: 32 }, (_, i) => ((i * 7) % 11) / 11),
      [2, 16],
    );
    const { logits, trace } = model.forward(x, { trace: true });
    assert.ok(trace);
    const block = trace.layers[1];
    // Re-declare the traced block (same kinds, names, parameters, settings) and run it.
    const toDecl = (l: (typeof trace.layers)[number]): LayerDecl => ({
      kind: l.kind,
      name: l.name,
      params: l.params,
      settings: l.settings,
      children: l.children?.map(toDecl),
    });
    const own: LayerTrace = { layers: [], mask: null, allowed: null };
    const out = tf.tidy(() => {
      const r = forwardLayers(trace.blocks[0].input, [toDecl(block)], model.params);
      own.layers = r.layers;
      for (const tensor of traceTensors(own)) tf.keep(tensor);
      return r.out;
    });
    const weights = model.getWeights();
    const a = networkBounds({ weights }, own).examples;
    const b = networkBounds({ weights, config: model.config }, trace).examples;
    for (let e = 0; e < 2; e++)
      for (const name of HEAD_VARIANTS) {
        const mine = a[e].layers[0].values[name];
        const theirs = b[e].blocks[0].block[name];
        assert.ok(
          Math.abs(mine - theirs) <= 1e-5 * theirs,
          `${norm} ${e} ${name}: ${mine} vs ${theirs}`,
        );
      }
    assert.deepEqual(
      a[0].layers[0].children.map((c) => c.name),
      b[0].layers[1].children.map((c) => c.name),
    );
    tf.dispose([logits, x, out]);
    disposeTrace(trace);
    disposeTrace(own);
    model.dispose();
  }
});
