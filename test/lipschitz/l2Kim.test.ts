// L2 attention has no bound (src/lipschitz/layers/l2Attention.ts): its rule gives the vacuous
// Infinity for every variant, so no dot-product bound is shown for an L2 model; and the layer
// (untied W_V, d_k < d) is not globally Lipschitz: its Jacobian norm grows without bound along
// a direction the scores do not see (docs/math.md section 2, "L2 self-attention").
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel, disposeTrace } from "../../src/nn/index.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { l2Attention64, L2_NO_BOUND } from "../../src/lipschitz/layers/l2Attention.ts";
import { spectralNorm } from "../../src/lipschitz/linalg.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { uniform } from "../nn/helpers.ts";

await useBackend("wasm");

test("an L2 model's attention, blocks and network get Infinity for every variant, with the note", () => {
  const model = createModel("vit-micro-l2", 2);
  const { logits, trace } = model.forward(tf.randomUniform([1, 28, 28, 1], 0, 1, "float32", 3), {
    trace: true,
  });
  logits.dispose();
  const ex = networkBounds(model, trace!).examples[0];
  disposeTrace(trace);
  for (const v of HEAD_VARIANTS) {
    assert.equal(ex.network[v], Infinity, v);
    assert.equal(ex.blocks[0].attention[v], Infinity, v);
    assert.equal(ex.blocks[0].block[v], Infinity, v);
    for (const h of ex.blocks[0].heads) assert.equal(h.values[v], Infinity);
  }
  assert.ok(ex.blocks[0].heads[0].stats.rows === 17 && ex.blocks[0].heads[0].stats.meanTop > 0);
  const attn = ex.layers[1].children[0].children[1];
  assert.equal(attn.kind, "l2Attention");
  assert.equal((attn.detail as { note: string }).note, L2_NO_BOUND);
  // Layers without attention keep their finite factors.
  assert.ok(
    Number.isFinite(ex.embedding) && Number.isFinite(ex.head) && Number.isFinite(ex.finalNorm),
  );
  model.dispose();
});

test("L2 attention with an untied W_V is not globally Lipschitz: ||Df|| grows with the radius (to 1e3)", () => {
  const d = 4;
  const heads = 2;
  const n = 3;
  const dk = d / heads;
  const w = (seed: number, shape: number[]): NamedArray => ({
    data: uniform(shape[0] * (shape[1] ?? 1), seed, -1, 1),
    shape,
  });
  const params = { wq: w(1, [d, d]), wv: w(2, [d, d]), wo: w(3, [d, d]), bo: w(4, [d]) };
  // u with u W_Q[:, 0:dk] = 0: head 0's scores do not see it (the part of a random vector
  // outside the span of head 0's query columns).
  const cols = Array.from({ length: dk }, (_, c) =>
    Float64Array.from({ length: d }, (_, i) => params.wq.data[i * d + c]),
  );
  const u = Float64Array.from(uniform(d, 5, -1, 1));
  const basis: Float64Array[] = [];
  for (const c of cols) {
    const b = Float64Array.from(c);
    for (const e of basis) {
      const dot = b.reduce((s, v, i) => s + v * e[i], 0);
      b.forEach((_, i) => (b[i] -= dot * e[i]));
    }
    const norm = Math.hypot(...b);
    basis.push(b.map((v) => v / norm));
  }
  for (const e of basis) {
    const dot = u.reduce((s, v, i) => s + v * e[i], 0);
    u.forEach((_, i) => (u[i] -= dot * e[i]));
  }
  const a = uniform(n * d, 6, -1, 1);
  const s = [1, -0.5, 0.25];
  const jacobianNorm = (t: number) => {
    const x = Float64Array.from(
      { length: n * d },
      (_, k) => a[k] + t * s[Math.floor(k / d)] * u[k % d],
    );
    const J = new Float64Array(n * d * n * d);
    const h = 1e-4 * Math.max(1, t);
    for (let c = 0; c < n * d; c++) {
      const plus = Float64Array.from(x);
      const minus = Float64Array.from(x);
      plus[c] += h;
      minus[c] -= h;
      const fp = l2Attention64(plus, n, heads, params).out;
      const fm = l2Attention64(minus, n, heads, params).out;
      for (let r = 0; r < n * d; r++) J[r * n * d + c] = (fp[r] - fm[r]) / (2 * h);
    }
    return spectralNorm(J, n * d, n * d);
  };
  const values = [1, 10, 100, 1000].map(jacobianNorm);
  // Growth linear in t once t dominates (seen: 2.0, 2.6, 19.7, 198): no constant bounds it.
  const msg = `||Df|| at radii 1, 10, 100, 1e3: ${values.join(", ")}`;
  assert.ok(values[2] > 5 * values[0] && values[3] > 8 * values[2], msg);
});
