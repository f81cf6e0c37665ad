import type { NamedArray } from "../nn/params.ts";
import { weightSpectralNorm } from "../lipschitz/weightCache.ts";
import { cachedHeadWeightNorms, headWeightsFrom } from "../lipschitz/rules/weightNorms.ts";
import { dotHeadQuantities, inputNorms } from "../lipschitz/rules/headQuantities.ts";
import type { HeadNorms, InputNorms } from "../lipschitz/rules/headTypes.ts";
import { probabilityBox, scoreHalfWidth, sigmaBoxMax, type SigmaRule } from "./ballRules.ts";
import { affine, cached, need, param, settingOf, type BallKind } from "./ballTypes.ts";

/**
 * Dot-product multi-head attention over a ball (docs/math.md section 7, "Attention over the
 * ball"): the float64 forward pass at the centre, then per head the t3 bound of section 2 with
 * every input quantity replaced by its sup over the ball: the softmax Jacobian's norm by its
 * maximum over each row's probability box (or 1/2), ||P|| over the box, and ||W_Q K_c^T||,
 * ||Q W_K^T||, ||V_c|| grown by the weights' norms times r.
 */

/** One head's radius-independent quantities at the centre. */
interface HeadBall {
  dk: number;
  /** Scores q_i . k_j / sqrt(d_k) [n, n] and P [n, n] (0 at masked keys). */
  s0: Float64Array;
  p0: Float64Array;
  /** ||W_Q k_j^T|| and ||W_K q_i^T|| per token [n]. */
  a: Float64Array;
  b: Float64Array;
  /** ||P||_2, ||W_Q K_c^T||_2, ||Q W_K^T||_2 (live rows), ||V_c||_2; whether any row is live. */
  pNorm: number;
  wqKc: number;
  qWk: number;
  vc: number;
  anyLive: boolean;
  /** ||W_Q W_K^T||_2 and ||W_V||_2. */
  m: number;
  wv: number;
}

/** sqrt(u G u^T) for u [dk] at `off` and symmetric G [dk, dk] (>= 0). */
function quadNorm(u: Float64Array, off: number, g: Float64Array, dk: number): number {
  let s = 0;
  for (let a = 0; a < dk; a++) {
    let t = 0;
    for (let c = 0; c < dk; c++) t += g[a * dk + c] * u[off + c];
    s += u[off + a] * t;
  }
  return Math.sqrt(Math.max(s, 0));
}

/**
 * Head h at the centre: its columns of Q, K, V [n, d] (all heads), its scores and P (masked
 * entries 0, a row with no allowed key all 0), its output written into `context` [n, d], and
 * the quantities its bound over the ball needs.
 */
function headBall(
  h: number,
  hn: HeadNorms,
  QKV: { Q: Float64Array; K: Float64Array; V: Float64Array },
  n: number,
  d: number,
  allowed: Uint8Array | undefined,
  xNorms: InputNorms,
  context: Float64Array,
): HeadBall {
  const dk = hn.dk;
  const take = (M: Float64Array) =>
    Float64Array.from({ length: n * dk }, (_, t) => M[Math.floor(t / dk) * d + h * dk + (t % dk)]);
  const [q, k, v] = [take(QKV.Q), take(QKV.K), take(QKV.V)];
  const scale = 1 / Math.sqrt(dk);
  const s0 = new Float64Array(n * n);
  const p0 = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    let max = -Infinity;
    for (let j = 0; j < n; j++) {
      if (allowed !== undefined && !allowed[i * n + j]) continue;
      let s = 0;
      for (let c = 0; c < dk; c++) s += q[i * dk + c] * k[j * dk + c];
      s0[i * n + j] = s * scale;
      max = Math.max(max, s0[i * n + j]);
    }
    if (max === -Infinity) continue; // no allowed key: P_i = 0, head output 0
    let z = 0;
    for (let j = 0; j < n; j++) {
      if (allowed !== undefined && !allowed[i * n + j]) continue;
      p0[i * n + j] = Math.exp(s0[i * n + j] - max);
      z += p0[i * n + j];
    }
    for (let j = 0; j < n; j++) p0[i * n + j] /= z;
    for (let c = 0; c < dk; c++) {
      let s = 0;
      for (let j = 0; j < n; j++) s += p0[i * n + j] * v[j * dk + c];
      context[i * d + h * dk + c] = s;
    }
  }
  const { quantities } = dotHeadQuantities({ n, xNorms, q, k, v, p: p0, allowed }, hn, new Set());
  // ||W_Q k_j^T||^2 = k_j G_Q k_j^T and ||W_K q_i^T||^2 = q_i G_K q_i^T.
  const a = Float64Array.from({ length: n }, (_, j) => quadNorm(k, j * dk, hn.gq, dk));
  const b = Float64Array.from({ length: n }, (_, i) => quadNorm(q, i * dk, hn.gk, dk));
  return {
    dk,
    s0,
    p0,
    a,
    b,
    pNorm: quantities.p,
    wqKc: quantities.wqKc,
    qWk: quantities.qWk,
    vc: quantities.vc,
    anyLive: quantities.anyLive,
    m: hn.a * Math.sqrt(dk),
    wv: hn.wv,
  };
}

/** Scratch arrays of one layer's bound, allocated once. */
interface Scratch {
  sLo: Float64Array;
  sHi: Float64Array;
  pLo: Float64Array;
  pHi: Float64Array;
  work: Float64Array;
  colSum: Float64Array;
}

/**
 * One head's bound over the ball of radius r: score intervals from the centre scores and
 * {@link scoreHalfWidth}, each row's probability box, sigma's box maximum (or 1/2), ||P|| over
 * the boxes, then the t3 structure ||P|| ||W_V|| + s (||W_Q K_c^T|| + ||Q W_K^T||) ||V_c|| /
 * sqrt(d_k) with each centre quantity at its sup.
 */
function headFactor(
  hb: HeadBall,
  keys: readonly Int32Array[],
  r: number,
  rule: SigmaRule,
  sc: Scratch,
): number {
  if (!hb.anyLive) return 0;
  const n = keys.length;
  sc.colSum.fill(0);
  let sMax = 0;
  let rowMax = 0;
  let dev2 = 0;
  for (let i = 0; i < n; i++) {
    const row = keys[i];
    const m = row.length;
    if (m === 0) continue;
    for (let t = 0; t < m; t++) {
      const j = row[t];
      const w = scoreHalfWidth(hb.a[j], hb.b[i], hb.m, r, j === i, hb.dk);
      sc.sLo[t] = hb.s0[i * n + j] - w;
      sc.sHi[t] = hb.s0[i * n + j] + w;
    }
    probabilityBox(sc.sLo, sc.sHi, sc.pLo, sc.pHi, m, sc.work);
    let rowSum = 0;
    for (let t = 0; t < m; t++) {
      const j = row[t];
      const p = hb.p0[i * n + j];
      // The centre's P is inside the box up to rounding: keep it so.
      sc.pHi[t] = Math.max(sc.pHi[t], p);
      sc.pLo[t] = Math.min(sc.pLo[t], p);
      sc.colSum[j] += sc.pHi[t];
      rowSum += sc.pHi[t];
      dev2 += Math.max(sc.pHi[t] - p, p - sc.pLo[t]) ** 2;
    }
    rowMax = Math.max(rowMax, Math.min(rowSum, 1));
    const s = rule === "half" ? (m > 1 ? 0.5 : 0) : sigmaBoxMax(sc.pLo, sc.pHi, m);
    sMax = Math.max(sMax, s);
  }
  let colMax = 0;
  for (let j = 0; j < n; j++) colMax = Math.max(colMax, sc.colSum[j]);
  // ||P||_2 <= sqrt(||P||_1 ||P||_inf), and ||P||_2 <= ||P0||_2 + ||P - P0||_F.
  const pBar = Math.min(Math.sqrt(colMax * rowMax), hb.pNorm + Math.sqrt(dev2));
  const paths = (hb.wqKc + hb.qWk + 2 * hb.m * r) * (hb.vc + hb.wv * r);
  return pBar * hb.wv + (sMax * paths) / Math.sqrt(hb.dk);
}

/**
 * The attention kind over the ball: roles wq, wk, wv, wo [d, d], bo [d], optional bq, bk, bv
 * (added only when all three are there, as src/nn/attention.ts does); setting `heads`. Its
 * factor is ||W_O|| (sum_h L_h(r)^2)^(1/2) (the multi-head rule of section 3).
 */
export const attentionBallKind: BallKind = (layer, x, n, d, ctx) => {
  const heads = settingOf(layer, "heads") as number;
  const [wq, wk, wv, wo] = ["wq", "wk", "wv", "wo"].map((role) => need(layer, role, ctx));
  const [bq, bk, bv] = ["bq", "bk", "bv"].map((role) => param(layer, role, ctx, true));
  const biases = bq !== undefined && bk !== undefined && bv !== undefined;
  if (d % heads !== 0)
    throw new RangeError(`certify: ${layer.name}: d = ${d} is not divisible by ${heads} heads`);
  const bias = (b: NamedArray | undefined) => (biases ? b : undefined);
  const QKV = {
    Q: affine(x, n, wq, bias(bq)),
    K: affine(x, n, wk, bias(bk)),
    V: affine(x, n, wv, bias(bv)),
  };
  const norms: HeadNorms[] = cached(ctx, `${layer.name}/heads`, () =>
    Array.from({ length: heads }, (_, h) =>
      cachedHeadWeightNorms(
        headWeightsFrom(
          { wq, wk, wv, ...(biases ? { bq, bk, bv } : {}) },
          h,
          heads,
          `${layer.name}.wq`,
        ),
      ),
    ),
  );
  const woNorm = cached(ctx, `${layer.name}/wo`, () => weightSpectralNorm(wo.data, d, d));
  const xNorms = inputNorms(x, n, d, { plain: false, augmented: false });
  const context = new Float64Array(n * d);
  const balls = norms.map((hn, h) => headBall(h, hn, QKV, n, d, ctx.allowed, xNorms, context));
  const out = affine(context, n, wo, need(layer, "bo", ctx));
  const allowed = ctx.allowed;
  const keys = Array.from({ length: n }, (_, i) =>
    Int32Array.from(
      [...Array(n).keys()].filter((j) => allowed === undefined || allowed[i * n + j]),
    ),
  );
  const sc: Scratch = {
    sLo: new Float64Array(n),
    sHi: new Float64Array(n),
    pLo: new Float64Array(n),
    pHi: new Float64Array(n),
    work: new Float64Array(2 * n + 2),
    colSum: new Float64Array(n),
  };
  const factor = (r: number, rule: SigmaRule) => {
    let sum = 0;
    for (const hb of balls) sum += headFactor(hb, keys, r, rule, sc) ** 2;
    return woNorm * Math.sqrt(sum);
  };
  return { kind: layer.kind, name: layer.name, out, rows: n, width: d, factor, children: [] };
};
