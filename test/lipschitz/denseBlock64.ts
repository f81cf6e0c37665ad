// Test oracle: dense float64 Jacobians of a pre-LN ViT block and of a whole ViT at one image,
// analytic, from the weights alone (the float64 reference forward of test/helpers/reference64.ts,
// the per-head Jacobian of ./rulesHelpers.ts), written apart from src/lipschitz so that the
// bounds and the true values attnlip computes (tfjs autodiff, Lanczos) are checked against
// something that shares none of their code. Column convention: J[(i, e), (r, a)] =
// d out[i, e] / d in[r, a], row-major [n d, n d]. Spectral norms by Lanczos on J^T J with full
// reorthogonalisation, the Ritz values from ml-matrix's eigensolver.
import { EigenvalueDecomposition, Matrix } from "ml-matrix";
import type { VitConfig } from "../../src/nn/config.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { gelu } from "../../src/nn/gelu.ts";
import { attention64, layerNorm64, linear64, vitForward64, vitSequence64, type Weights } from "../helpers/reference64.ts";
import { mulberry32, normals } from "./rulesHelpers.ts";

function weight(weights: Weights, name: string): NamedArray {
  const v = weights.get(name);
  if (v === undefined) throw new Error(`denseBlock64: missing weight "${name}"`);
  return v;
}

/**
 * LayerNorm's row Jacobian at row x [d] (column convention, [d, d]):
 * dy_e/dx_a = gamma_e ((delta_ea - 1/d) / s - c_e c_a / (d s^3)), c = x - mean, s = sqrt(var + eps).
 */
export function layerNormJacobian64(x: ArrayLike<number>, gamma: ArrayLike<number>, eps: number): Float64Array {
  const d = gamma.length;
  let mean = 0;
  for (let a = 0; a < d; a++) mean += x[a];
  mean /= d;
  const c = Float64Array.from({ length: d }, (_, a) => x[a] - mean);
  let v = 0;
  for (let a = 0; a < d; a++) v += c[a] * c[a];
  const s = Math.sqrt(v / d + eps);
  const J = new Float64Array(d * d);
  for (let e = 0; e < d; e++)
    for (let a = 0; a < d; a++)
      J[e * d + a] = gamma[e] * (((e === a ? 1 : 0) - 1 / d) / s - (c[e] * c[a]) / (d * s * s * s));
  return J;
}

/** GELU's derivative (tanh form) by its formula, written here again: the MLP rule's derivative is part of what the oracle checks. */
function geluTanhDerivative(h: number): number {
  const k = Math.sqrt(2 / Math.PI);
  const u = k * (h + 0.044715 * h ** 3);
  const t = Math.tanh(u);
  return 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * k * (1 + 3 * 0.044715 * h * h);
}

/** The parts of one pre-LN block's Jacobian at its input x [n, d]. */
export interface BlockJacobian64 {
  n: number;
  d: number;
  /** d attn(LN1(x)) / dx: the attention branch (no residual), as products with vectors [n d]. */
  branch: Operator;
  /** Per row q the MLP half's row Jacobian I + d mlp(LN2(m_q)) / dm_q at m = x + attn(LN1(x)), [n][d, d]. */
  mlpRows: Float64Array[];
  /** The block's output [n, d]. */
  out: Float64Array;
}

/**
 * The Jacobian of block i of a pre-LN ViT (tanh GELU, no mask) at its input x [n, d], in two
 * factors: the block's Jacobian is diag(mlpRows) (I + branch). The branch's products follow the
 * chain rule through y = LN1(x) and, per head h (row vectors, q = y W_Q,h + b, k, v likewise,
 * S = q k^T / sqrt(d_k), P = rowsoftmax(S), out_i = sum_h (P v)_i W_O,h + b_O):
 *   dS = (dq k^T + q dk^T) / sqrt(d_k), dP_i = P_i (dS_i - P_i . dS_i), d(P v) = dP v + P dv;
 * the transposed products run the same steps backwards.
 *
 * @throws Error for a post-LN or L2-attention config, or another activation.
 */
export function blockJacobian64(cfg: VitConfig, weights: Weights, i: number, x: Float64Array): BlockJacobian64 {
  if (cfg.norm !== "pre" || (cfg.attention ?? "dot") !== "dot" || (cfg.activation ?? "gelu-tanh") !== "gelu-tanh")
    throw new Error("blockJacobian64: pre-LN dot-product blocks with tanh GELU only");
  const d = cfg.dModel;
  const n = x.length / d;
  const H = cfg.heads;
  const dk = d / H;
  const N = n * d;
  const g = (name: string) => weight(weights, `blocks.${i}.${name}`);
  const ln1 = g("ln1.gamma");
  const y = layerNorm64(x, n, ln1, g("ln1.beta"), cfg.lnEps);
  const att = attention64(y, n, H, weights, `blocks.${i}.attn`); // q, k, v [H, n, dk], p [H, n, n]
  const [wq, wk, wv, wo] = ["wq", "wk", "wv", "wo"].map((k) => g(`attn.${k}`).data);
  const Ls = Array.from({ length: n }, (_, r) => layerNormJacobian64(x.subarray(r * d, (r + 1) * d), ln1.data, cfg.lnEps));
  const sq = Math.sqrt(dk);
  // Rows [n, d] times the head's columns of W [d, d]: [n, dk]; and back: [n, dk] times their transpose.
  const down = (u: Float64Array, w: ArrayLike<number>, h: number) => {
    const out = new Float64Array(n * dk);
    for (let t = 0; t < n; t++)
      for (let a = 0; a < d; a++) {
        const ua = u[t * d + a];
        if (ua !== 0) for (let c = 0; c < dk; c++) out[t * dk + c] += ua * w[a * d + h * dk + c];
      }
    return out;
  };
  const upInto = (out: Float64Array, gr: Float64Array, w: ArrayLike<number>, h: number) => {
    for (let t = 0; t < n; t++)
      for (let a = 0; a < d; a++) {
        let s = 0;
        for (let c = 0; c < dk; c++) s += gr[t * dk + c] * w[a * d + h * dk + c];
        out[t * d + a] += s;
      }
  };
  const rowsTimes = (v: Float64Array, transpose: boolean) => rowBlocks(Ls, d, v, transpose);
  const at = (m: Float64Array, h: number) => m.subarray(h * n * dk, (h + 1) * n * dk);
  const branch: Operator = {
    rows: N,
    cols: N,
    apply(v) {
      const u = rowsTimes(v, false); // dy
      const out = new Float64Array(N);
      for (let h = 0; h < H; h++) {
        const [q, k, vv] = [at(att.q, h), at(att.k, h), at(att.v, h)];
        const P = att.p.subarray(h * n * n, (h + 1) * n * n);
        const [dq, dkk, dv] = [down(u, wq, h), down(u, wk, h), down(u, wv, h)];
        const ctx = new Float64Array(n * dk);
        for (let a = 0; a < n; a++) {
          const dS = new Float64Array(n);
          let mean = 0;
          for (let l = 0; l < n; l++) {
            let s = 0;
            for (let c = 0; c < dk; c++) s += dq[a * dk + c] * k[l * dk + c] + q[a * dk + c] * dkk[l * dk + c];
            dS[l] = s / sq;
            mean += P[a * n + l] * dS[l];
          }
          for (let l = 0; l < n; l++) {
            const dP = P[a * n + l] * (dS[l] - mean);
            for (let c = 0; c < dk; c++) ctx[a * dk + c] += dP * vv[l * dk + c] + P[a * n + l] * dv[l * dk + c];
          }
        }
        // out_a += ctx_a W_O,h (rows h dk .. of W_O [d, d])
        for (let a = 0; a < n; a++)
          for (let c = 0; c < dk; c++) {
            const z = ctx[a * dk + c];
            if (z !== 0) for (let e = 0; e < d; e++) out[a * d + e] += z * wo[(h * dk + c) * d + e];
          }
      }
      return out;
    },
    applyT(w) {
      const gu = new Float64Array(N);
      for (let h = 0; h < H; h++) {
        const [q, k, vv] = [at(att.q, h), at(att.k, h), at(att.v, h)];
        const P = att.p.subarray(h * n * n, (h + 1) * n * n);
        const gctx = new Float64Array(n * dk);
        for (let a = 0; a < n; a++)
          for (let c = 0; c < dk; c++) {
            let s = 0;
            for (let e = 0; e < d; e++) s += wo[(h * dk + c) * d + e] * w[a * d + e];
            gctx[a * dk + c] = s;
          }
        const [gq, gk, gv] = [new Float64Array(n * dk), new Float64Array(n * dk), new Float64Array(n * dk)];
        for (let a = 0; a < n; a++) {
          const gP = new Float64Array(n);
          let mean = 0;
          for (let l = 0; l < n; l++) {
            let s = 0;
            for (let c = 0; c < dk; c++) {
              s += gctx[a * dk + c] * vv[l * dk + c];
              gv[l * dk + c] += P[a * n + l] * gctx[a * dk + c];
            }
            gP[l] = s;
            mean += P[a * n + l] * s;
          }
          for (let l = 0; l < n; l++) {
            const gS = (P[a * n + l] * (gP[l] - mean)) / sq;
            if (gS === 0) continue;
            for (let c = 0; c < dk; c++) {
              gq[a * dk + c] += gS * k[l * dk + c];
              gk[l * dk + c] += gS * q[a * dk + c];
            }
          }
        }
        upInto(gu, gq, wq, h);
        upInto(gu, gk, wk, h);
        upInto(gu, gv, wv, h);
      }
      return rowsTimes(gu, true);
    },
  };
  // The MLP half, row by row at m = x + attn(LN1(x)).
  const m = Float64Array.from(x, (v, t) => v + att.out[t]);
  const ln2 = g("ln2.gamma");
  const z = layerNorm64(m, n, ln2, g("ln2.beta"), cfg.lnEps);
  const W1 = g("mlp.w1");
  const W2 = g("mlp.w2");
  const hidden = W1.shape[1];
  const hPre = linear64(z, n, W1, g("mlp.b1"));
  const mlpOut = linear64(hPre.map(gelu), n, W2, g("mlp.b2"));
  const out = Float64Array.from(m, (v, t) => v + mlpOut[t]);
  const mlpRows: Float64Array[] = [];
  for (let q = 0; q < n; q++) {
    const L2 = layerNormJacobian64(m.subarray(q * d, (q + 1) * d), ln2.data, cfg.lnEps);
    // dmlp_e/dz_b = sum_u W2[u, e] act'(h_u) W1[b, u]
    const A = new Float64Array(d * d);
    for (let u = 0; u < hidden; u++) {
      const s = geluTanhDerivative(hPre[q * hidden + u]);
      for (let e = 0; e < d; e++) {
        const w2 = W2.data[u * d + e] * s;
        for (let b = 0; b < d; b++) A[e * d + b] += w2 * W1.data[b * hidden + u];
      }
    }
    const M = new Float64Array(d * d);
    for (let e = 0; e < d; e++) {
      M[e * d + e] = 1;
      for (let b = 0; b < d; b++) {
        const v = A[e * d + b];
        for (let a = 0; a < d; a++) M[e * d + a] += v * L2[b * d + a];
      }
    }
    mlpRows.push(M);
  }
  return { n, d, branch, mlpRows, out };
}

/** v -> diag(rows) v for row blocks [d, d] (or their transposes). */
function rowBlocks(rows: Float64Array[], d: number, v: Float64Array, transpose: boolean): Float64Array {
  const out = new Float64Array(v.length);
  rows.forEach((M, q) => {
    for (let e = 0; e < d; e++)
      for (let f = 0; f < d; f++) {
        const m = transpose ? M[f * d + e] : M[e * d + f];
        out[q * d + e] += m * v[q * d + f];
      }
  });
  return out;
}

/** A linear map by its products. */
export interface Operator {
  rows: number;
  cols: number;
  apply(v: Float64Array): Float64Array;
  applyT(u: Float64Array): Float64Array;
}

/** The operators of a block's Jacobian and its two halves: branch, I + branch, diag(mlpRows), the block. */
export function blockOperators(b: BlockJacobian64): { branch: Operator; attnHalf: Operator; mlpHalf: Operator; block: Operator } {
  const N = b.n * b.d;
  const branch = b.branch;
  const plus = (op: Operator): Operator => ({ rows: N, cols: N, apply: (v) => op.apply(v).map((x, t) => x + v[t]), applyT: (u) => op.applyT(u).map((x, t) => x + u[t]) });
  const attnHalf = plus(branch);
  const mlpHalf: Operator = { rows: N, cols: N, apply: (v) => rowBlocks(b.mlpRows, b.d, v, false), applyT: (u) => rowBlocks(b.mlpRows, b.d, u, true) };
  const block: Operator = { rows: N, cols: N, apply: (v) => mlpHalf.apply(attnHalf.apply(v)), applyT: (u) => attnHalf.applyT(mlpHalf.applyT(u)) };
  return { branch, attnHalf, mlpHalf, block };
}

/** Everything {@link vitJacobians64} gives: per block its Jacobian parts, and the network's input Jacobian [classes, pixels]. */
export interface VitJacobians64 {
  blocks: BlockJacobian64[];
  network: Float64Array;
  classes: number;
  pixels: number;
  logits: Float64Array;
}

/**
 * Dense Jacobians of a pre-LN ViT (cls pooling, final LayerNorm, linear head) at one image:
 * every block's, and the network's d logits / d pixels, back-propagated through the blocks'
 * dense Jacobians and the patch embedding.
 */
export function vitJacobians64(cfg: VitConfig, weights: Weights, image: ArrayLike<number>): VitJacobians64 {
  const d = cfg.dModel;
  let x = vitSequence64(cfg, weights, image);
  const n = x.length / d;
  const N = n * d;
  const blocks: BlockJacobian64[] = [];
  for (let i = 0; i < cfg.blocks; i++) {
    const b = blockJacobian64(cfg, weights, i, x);
    blocks.push(b);
    x = b.out;
  }
  const head = weight(weights, "head.w");
  const classes = head.shape[1];
  const Lf = layerNormJacobian64(x.subarray(0, d), weight(weights, "norm.gamma").data, cfg.lnEps);
  // G [classes, n d]: d logits / d (last block's output); only the cls row feeds the head.
  let G = new Float64Array(classes * N);
  for (let k = 0; k < classes; k++)
    for (let a = 0; a < d; a++) {
      let s = 0;
      for (let e = 0; e < d; e++) s += head.data[e * classes + k] * Lf[e * d + a];
      G[k * N + a] = s;
    }
  for (let i = cfg.blocks - 1; i >= 0; i--) {
    const { block } = blockOperators(blocks[i]);
    const next = new Float64Array(classes * N);
    for (let k = 0; k < classes; k++) next.set(block.applyT(G.subarray(k * N, (k + 1) * N)), k * N);
    G = next;
  }
  // Through the patch embedding: pixel (y, x, c) feeds token 1 + patch, row (py p + px) c + c of patch.w.
  const { imageSize: s, channels: ch, patchSize: p } = cfg;
  const gsz = s / p;
  const pw = weight(weights, "patch.w");
  const pixels = s * s * ch;
  const network = new Float64Array(classes * pixels);
  for (let k = 0; k < classes; k++)
    for (let yy = 0; yy < s; yy++)
      for (let xx = 0; xx < s; xx++)
        for (let c = 0; c < ch; c++) {
          const t = 1 + Math.floor(yy / p) * gsz + Math.floor(xx / p);
          const row = ((yy % p) * p + (xx % p)) * ch + c;
          let v = 0;
          for (let e = 0; e < d; e++) v += G[k * N + t * d + e] * pw.data[row * d + e];
          network[k * pixels + (yy * s + xx) * ch + c] = v;
        }
  const logits = vitForward64(cfg, weights, image).logits;
  return { blocks, network, classes, pixels, logits };
}

/**
 * ||A||_2 of a linear map by Lanczos on A^T A (full reorthogonalisation, seeded start), stopped
 * when the top Ritz pair's residual is below `tolerance` of its value (or when the Krylov space
 * is the whole space). An estimate from below, equal to the norm when the residual is small.
 *
 * @returns the value and the residual reached (relative).
 */
export function lanczosNorm(op: Operator, maxSteps = 200, tolerance = 1e-10): { value: number; residual: number; steps: number } {
  const cols = op.cols;
  const apply = (v: Float64Array) => op.applyT(op.apply(v));
  const dot = (a: Float64Array, b: Float64Array) => {
    let s = 0;
    for (let t = 0; t < a.length; t++) s += a[t] * b[t];
    return s;
  };
  const basis: Float64Array[] = [];
  const images: Float64Array[] = [];
  const gram: number[][] = []; // gram[a][b] = basis_a . A basis_b, b <= a
  let v = Float64Array.from(normals(mulberry32(11), cols));
  let best = { value: 0, residual: Infinity, steps: 0 };
  for (let step = 0; step < Math.min(maxSteps, cols); step++) {
    for (let pass = 0; pass < 2; pass++)
      for (const b of basis) {
        const c = dot(v, b);
        for (let t = 0; t < cols; t++) v[t] -= c * b[t];
      }
    const norm = Math.sqrt(dot(v, v));
    if (norm === 0) break;
    v = v.map((x) => x / norm);
    basis.push(v);
    images.push(apply(v));
    const k = basis.length;
    gram.push(Array.from({ length: k }, (_, b) => dot(v, images[b])));
    const T = new Matrix(k, k);
    for (let a = 0; a < k; a++)
      for (let b = 0; b <= a; b++) {
        T.set(a, b, gram[a][b]);
        T.set(b, a, gram[a][b]);
      }
    const eig = new EigenvalueDecomposition(T, { assumeSymmetric: true });
    const values = eig.realEigenvalues;
    let top = 0;
    for (let a = 1; a < k; a++) if (values[a] > values[top]) top = a;
    const theta = values[top];
    // Residual of the Ritz pair: ||A u - theta u|| with u = sum_a y_a basis_a.
    const res = new Float64Array(cols);
    for (let a = 0; a < k; a++) {
      const ya = eig.eigenvectorMatrix.get(a, top);
      for (let t = 0; t < cols; t++) res[t] += ya * (images[a][t] - theta * basis[a][t]);
    }
    best = { value: Math.sqrt(Math.max(theta, 0)), residual: Math.sqrt(dot(res, res)) / Math.max(theta, 1e-300), steps: k };
    if (best.residual < tolerance) break;
    v = Float64Array.from(images[k - 1]);
  }
  return best;
}
