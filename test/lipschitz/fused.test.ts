// The `fused` variant (docs/math.md section 2, `fused`; section 3, "A row-wise map fused into the
// next layer") against dense Jacobians: a LayerNorm followed by an attention head on 1,200 random
// cases, pre-LN attention branches of 120 random blocks, and the blocks of a trained model.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel, disposeTrace } from "../../src/nn/index.ts";
import type { VitConfig } from "../../src/nn/config.ts";
import {
  attentionHeadBounds,
  fusedWithRowWeights,
  headWeightNorms,
  type HeadWeights,
} from "../../src/lipschitz/rules/attentionHead.ts";
import { layerNormRowJacobian } from "../../src/lipschitz/rules/rowwise.ts";
import { preRowwise } from "../../src/lipschitz/rules/preRowwise.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { train } from "../../src/train/trainer.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { attention64, layerNorm64 } from "../helpers/reference64.ts";
import { QUIET, tempDir } from "../train/helpers.ts";
import {
  fdJacobian,
  headForward,
  headJacobian,
  mulberry32,
  normals,
  pick,
  randomAllowed,
  tinyVitWeights,
  sigmaMax,
} from "./rulesHelpers.ts";

before(async () => {
  await useBackend("cpu");
});

test("LayerNorm then one head: fused >= the dense truth of the composition, <= cov x the LayerNorm factor; without the LayerNorm fused <= cov (1,200 cases)", () => {
  const rand = mulberry32(1601);
  let cases = 0;
  let tightest = Infinity;
  for (let t = 0; cases < 1200; t++) {
    const heads = pick(rand, [1, 2, 3]);
    const dk = pick(rand, [1, 2, 3]);
    const d = heads * dk;
    if (d < 2) continue;
    const n = 1 + Math.floor(rand() * 6);
    const eps = pick(rand, [1e-5, 1e-3]);
    const scale = pick(rand, [0.3, 1, 3]);
    // Rows of very different spreads: small spreads give large LayerNorm Jacobians.
    const u = new Float64Array(n * d);
    for (let j = 0; j < n; j++) {
      const spread = pick(rand, [1, 1, 0.1, 0.01]);
      const row = normals(rand, d, spread);
      const offset = 3 * (rand() - 0.5);
      for (let a = 0; a < d; a++) u[j * d + a] = row[a] + offset;
    }
    const gamma = Float64Array.from(normals(rand, d, 1), (g) => (rand() < 0.1 ? 0 : g));
    const beta = normals(rand, d, 0.3);
    const x = layerNorm64(
      u,
      n,
      { data: Float32Array.from(gamma), shape: [d] },
      { data: Float32Array.from(beta), shape: [d] },
      eps,
    );
    const full = (s: number) => normals(rand, d * d, s / Math.sqrt(d));
    const w = { wq: full(scale), wk: full(scale), wv: full(scale) };
    const bias = rand() < 0.5;
    const allowed = randomAllowed(rand, n);
    const L = Array.from({ length: n }, (_, j) =>
      layerNormRowJacobian(u.subarray(j * d, (j + 1) * d), gamma, eps),
    );
    const mats = L.map((l) => l.matrix());
    let factor = 0;
    for (let j = 0; j < n; j++) factor = Math.max(factor, sigmaMax(mats[j], d, d));
    const pres = preRowwise((j) => L[j], n, w, heads, factor);
    for (let h = 0; h < heads; h++) {
      const cols = (m: Float64Array) =>
        Float64Array.from(
          { length: d * dk },
          (_, k) => m[Math.floor(k / dk) * d + h * dk + (k % dk)],
        );
      const b = () => (bias ? normals(rand, dk, scale / 2) : undefined);
      const hw: HeadWeights = {
        d,
        dk,
        wq: cols(w.wq),
        wk: cols(w.wk),
        wv: cols(w.wv),
        bq: b(),
        bk: b(),
        bv: b(),
      };
      const f = headForward(x, n, hw, allowed);
      const act = { n, x, q: f.q, k: f.k, v: f.v, p: f.p, allowed };
      const norms = headWeightNorms(hw);
      const withLn = attentionHeadBounds(act, norms, { variants: ["cov", "fused"], pre: pres[h] });
      const alone = attentionHeadBounds(act, norms, { variants: ["cov", "fused"] });
      // Dense truth of head(LN(U)): column (j, b) = sum_a J_head[:, (j, a)] L_j[b][a].
      const jh = headJacobian(x, n, hw, allowed);
      const rows = n * dk;
      const jt = new Float64Array(rows * n * d);
      for (let r = 0; r < rows; r++)
        for (let j = 0; j < n; j++)
          for (let bb = 0; bb < d; bb++) {
            let s = 0;
            for (let a = 0; a < d; a++) s += jh[r * n * d + j * d + a] * mats[j][bb * d + a];
            jt[r * n * d + j * d + bb] = s;
          }
      const truth = sigmaMax(jt, rows, n * d);
      const headTruth = sigmaMax(jh, rows, n * d);
      const fused = withLn.values.fused;
      // 1e-6: a LayerNorm row Jacobian's component along the normalised row, (1 - ||z||^2 / d),
      // comes from a cancellation in both the bound's products and the dense truth; where it
      // dominates (d = 2, where it is all of the Jacobian) the two agree to about 1e-7.
      assert.ok(
        fused >= truth * (1 - 1e-6) - 1e-12,
        `case ${t}.${h} (n ${n}, d ${d}, d_k ${dk}): fused ${fused} < truth ${truth}; paths ${withLn.parts.fusedValuePath} ${withLn.parts.fusedQueryPath} ${withLn.parts.fusedKeyPath}`,
      );
      assert.ok(
        fused <= alone.values.cov * factor * (1 + 1e-9) + 1e-12,
        `case ${t}.${h}: fused ${fused} > cov x LN ${alone.values.cov * factor}`,
      );
      assert.ok(
        alone.values.fused >= headTruth * (1 - 1e-9) - 1e-12,
        `case ${t}.${h}: fused alone below the head's truth`,
      );
      assert.ok(
        alone.values.fused <= alone.values.cov,
        `case ${t}.${h}: fused alone above cov`,
      );
      // Output-row weights (a row-wise map after the head), on every third case: the weighted
      // bound is above the weighted dense truth ||diag(w) J||, and reweighting the kept per-row
      // pieces gives it too.
      if (cases % 3 === 0) {
      const wts = Float64Array.from({ length: n }, () => (rand() < 0.2 ? 0 : pick(rand, [0.1, 1, 5]) * rand()));
      const weighted = attentionHeadBounds(act, norms, { variants: ["fused"], pre: pres[h], post: wts }).values.fused;
      const scaled = Float64Array.from(jt, (x, k) => x * wts[Math.floor(Math.floor(k / (n * d)) / dk)]);
      const weightedTruth = sigmaMax(scaled, rows, n * d);
      assert.ok(weighted >= weightedTruth * (1 - 1e-6) - 1e-12, `case ${t}.${h}: weighted fused ${weighted} < truth ${weightedTruth}`);
      const kept = attentionHeadBounds(act, norms, { variants: ["fused"], pre: pres[h], keepRows: true });
      assert.ok(Math.abs(kept.values.fused - fused) <= 1e-12 * fused + 1e-15, `case ${t}.${h}: keepRows changed fused`);
      const reweighted = fusedWithRowWeights(kept.fusedRows!, wts);
      assert.ok(Math.abs(reweighted - weighted) <= 1e-9 * weighted + 1e-15, `case ${t}.${h}: reweighted ${reweighted} vs ${weighted}`);
      }
      if (truth > 1e-6) tightest = Math.min(tightest, fused / truth);
      cases++;
    }
  }
  assert.ok(tightest < 2, `some case should be close to its truth (tightest ratio ${tightest})`);
});

/** The attention branch u -> attn(LN1(u)) of block i and the residual's `fused` and `cov` values. */
function attentionBranchCheck(
  model: ReturnType<typeof createModel>,
  x: tf.Tensor,
  what: string,
  fdStep = 1e-6,
): number[] {
  const c = model.config as VitConfig;
  const weights = model.getWeights();
  const { logits, trace } = model.forward(x, { trace: true });
  const nb = networkBounds(model, trace!);
  const ratios: number[] = [];
  const b = x.shape[0];
  for (let e = 0; e < b; e++) {
    for (let i = 0; i < c.blocks; i++) {
      const all = Float64Array.from(trace!.blocks[i].input.dataSync());
      const per = all.length / b;
      const u = all.subarray(e * per, (e + 1) * per);
      const n = per / c.dModel;
      const g = (k: string) => weights.get(`blocks.${i}.${k}`)!;
      const branch = (z: Float64Array) =>
        attention64(
          layerNorm64(z, n, g("ln1.gamma"), g("ln1.beta"), c.lnEps),
          n,
          c.heads,
          weights,
          `blocks.${i}.attn`,
        ).out;
      const truth = sigmaMax(fdJacobian(branch, Float64Array.from(u), fdStep), per, per);
      const block = nb.examples[e].layers.find((l) => l.name === `blocks.${i}`)!;
      const res = block.children.find((l) => l.name === `blocks.${i}.attnResidual`)!;
      const fused = res.values.fused - 1;
      const product = res.values.cov - 1;
      assert.ok(
        fused >= truth * (1 - 1e-4) - 1e-8,
        `${what} ${e}, block ${i}: fused branch ${fused} < truth ${truth}`,
      );
      assert.ok(
        fused <= product * (1 + 1e-9),
        `${what} ${e}, block ${i}: fused branch ${fused} > cov's product ${product}`,
      );
      ratios.push(fused / truth);
    }
  }
  logits.dispose();
  disposeTrace(trace!);
  return ratios;
}

test("pre-LN attention branches of 120 random blocks: the residual's fused value - 1 >= the dense truth of attn(LN1(u)), <= cov's product", () => {
  const rand = mulberry32(1602);
  for (let t = 0; t < 120; t++) {
    const heads = pick(rand, [1, 2]);
    const dk = pick(rand, [2, 3]);
    const cfg = {
      kind: "vit" as const,
      imageSize: 4,
      channels: 1,
      patchSize: 2,
      dModel: heads * dk,
      heads,
      blocks: 1,
      mlpHidden: 4,
      classes: 2,
      qkvBias: rand() < 0.5,
      norm: "pre" as const,
      lnEps: pick(rand, [1e-5, 1e-3]),
    };
    const model = createModel(cfg);
    const c = model.config as VitConfig;
    model.setWeights(
      tinyVitWeights(rand, c),
    );
    const x = tf.randomUniform([1, 4, 4, 1], 0, pick(rand, [0.01, 1]), "float32", t);
    attentionBranchCheck(model, x, `case ${t}`);
    x.dispose();
    model.dispose();
  }
});

test("a trained vit-micro: every block's fused attention branch >= its dense truth on two random images, and tighter than cov's product", async () => {
  const out = tempDir("attnlip-fused-");
  await train({
    data: "mnist",
    model: "vit-micro",
    epochs: 1,
    limit: 128,
    testLimit: 16,
    batchSize: 32,
    seed: 4,
    out,
    ...QUIET,
  });
  const { model } = await loadCheckpoint(out);
  const x = tf.randomUniform([2, 28, 28, 1], 0, 1, "float32", 7);
  const ratios = attentionBranchCheck(model, x, "input");
  assert.ok(ratios.every((r) => r >= 1 - 1e-4));
  x.dispose();
  model.dispose();
});
