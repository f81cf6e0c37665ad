import { oneHotFloat, tf } from "../../backend.ts";
import type { TransformerClassifier } from "../../nn/model.ts";
import type { DenseJacobian } from "./denseJacobian.ts";
import { spectralNorm } from "../linalg.ts";

/**
 * The exact end-to-end local Lipschitz constant of a classifier (docs/math.md section 3, last item):
 * the C x D Jacobian of the logits with respect to the input, and its largest singular value.
 *
 * The Jacobian comes from ONE backward pass over C copies of the input, copy i seeded with the
 * one-hot cotangent e_i (docs/performance.md: about 2x faster than C separate gradient calls on wasm). This
 * needs the logits of a copy to depend on that copy only (true for attnlip's models in
 * inference mode: no batch statistics, dropout off). Several examples share one pass: K
 * examples give K * C copies. A pass holds every copy's activations, so at real size (a
 * ViT-B/16 copy's pass peaks at 2.6 GB; tfjs-wasm's heap stops at 4 GB) the copies are cut into
 * passes of at most `maxCopies` ({@link copiesPerPass}): the classes' rows in groups.
 */

/** A logits map: float32 [batch, ...] -> float32 [batch, C], each row depending on its own example only. */
export type LogitsFn = (x: tf.Tensor) => tf.Tensor;

/**
 * Jacobians of logitsFn at K examples, by backward passes over at most `maxCopies` copies each
 * (K * C copies in one pass when they fit; else the classes in groups of
 * floor(maxCopies / K), at least one).
 *
 * @param xs float32 [K, ...].
 * @returns K Jacobians, each C x D with D = xs.size / K.
 */
function batchedInputJacobians(
  logitsFn: LogitsFn,
  xs: tf.Tensor,
  classes: number,
  maxCopies = Infinity,
): DenseJacobian[] {
  const k = xs.shape[0] as number;
  const rest = xs.shape.slice(1);
  const cols = rest.reduce((a, b) => a * b, 1);
  const group = Math.max(1, Math.min(classes, Math.floor(maxCopies / k)));
  const out: DenseJacobian[] = [];
  for (let e = 0; e < k; e++)
    out.push({ data: new Float64Array(classes * cols), rows: classes, cols });
  for (let c0 = 0; c0 < classes; c0 += group) {
    const g = Math.min(group, classes - c0);
    const grads = tf.tidy(() => {
      const copies = tf.reshape(
        tf.tile(tf.reshape(xs, [k, 1, ...rest]), [1, g, ...rest.map(() => 1)]),
        [k * g, ...rest],
      );
      const ids = tf.tile(tf.range(c0, c0 + g, 1, "int32"), [k]);
      const seeds = oneHotFloat(ids, classes);
      const f = (z: tf.Tensor): tf.Tensor => {
        const y = logitsFn(z);
        if (y.rank !== 2 || y.shape[0] !== k * g || y.shape[1] !== classes)
          throw new RangeError(
            `inputJacobian: logits must be [${k * g}, ${classes}], got [${y.shape.join(", ")}]`,
          );
        return y;
      };
      return tf.grad(f)(copies, seeds);
    });
    const all = grads.dataSync();
    grads.dispose();
    for (let e = 0; e < k; e++)
      out[e].data.set(all.subarray(e * g * cols, (e + 1) * g * cols), c0 * cols);
  }
  return out;
}

/**
 * How many copies of one input a backward pass may hold: a budget of 1.5 GiB over an estimate of
 * what one copy's forward and backward pass needs at its peak. The estimate counts, per block
 * and token, 12 d_model + 4 d_mlp values and 3 attention rows per head, at 40 bytes each (10
 * float32 values per value counted: calibrated on ViT-B/16, whose pass for one copy peaked at
 * 2.6 GB in tf.profile, with the gradients' and transposed weights' temporaries; tfjs-wasm's
 * heap stops at 4 GB, and a pass of 3 copies stopped it). At least 1.
 *
 * @param config the model's dModel, mlpHidden, heads and blocks.
 * @param tokens the sequence length (a ViT: patches + 1).
 * @returns a positive integer: 1 for a ViT-B/16 (197 tokens) and a BERT-base at 128 tokens,
 *   about 100 for vit-tiny.
 * @example copiesPerPass(model.config, 197)
 */
export function copiesPerPass(
  config: { dModel: number; mlpHidden: number; heads: number; blocks: number },
  tokens: number,
): number {
  const perTokenBlock = 12 * config.dModel + 4 * config.mlpHidden + 3 * config.heads * tokens;
  const bytes = 40 * tokens * config.blocks * perTokenBlock;
  return Math.max(1, Math.floor(1.5 * 2 ** 30 / bytes));
}

function classesOf(logitsFn: LogitsFn, x: tf.Tensor): number {
  const shape = tf.tidy(() => logitsFn(x).shape.slice()) as unknown as number[];
  if (shape.length !== 2 || shape[0] !== 1)
    throw new RangeError(
      `inputJacobian: logits of one example must be [1, C], got [${shape.join(", ")}]`,
    );
  return shape[1];
}

/**
 * The exact C x D Jacobian of the logits with respect to the input at one example, by one
 * backward pass over C copies of x (see the module comment).
 *
 * @param logitsFn float32 [batch, ...] -> [batch, C], per-example independent.
 * @param x float32 [1, ...] (D = x.size entries).
 * @param classes C when known (saves one forward pass); otherwise found by running logitsFn(x).
 * @param maxCopies copies of x per backward pass (default all C in one pass; fewer bound the
 *   memory a pass needs, see {@link copiesPerPass}).
 * @returns {data: row-major C x D float64 (row i = gradient of logit i), rows: C, cols: D}.
 *   Leaves tf.memory().numTensors unchanged.
 * @throws RangeError when x is not [1, ...] or the logits are not [batch, C]; TypeError when
 *   x is not float32.
 */
export function inputJacobian(
  logitsFn: LogitsFn,
  x: tf.Tensor,
  classes?: number,
  maxCopies = Infinity,
): DenseJacobian {
  if (x.rank < 1 || x.shape[0] !== 1)
    throw new RangeError(`inputJacobian: x must be [1, ...], got [${x.shape.join(", ")}]`);
  if (x.dtype !== "float32")
    throw new TypeError(`inputJacobian: x must be float32, got ${x.dtype}`);
  if (!(maxCopies >= 1))
    throw new RangeError(`inputJacobian: maxCopies must be at least 1, got ${maxCopies}`);
  const c = classes ?? classesOf(logitsFn, x);
  return batchedInputJacobians(logitsFn, x, c, maxCopies)[0];
}

/** Options of {@link networkLipschitz}. */
export interface NetworkLipschitzOptions {
  /** Text models: padding mask [B, n], 1 = real token (default: all real). Not for ViT. */
  mask?: tf.Tensor | null;
  /** ViT: examples per backward pass (each pass has examplesPerPass * C copies). Default 8. */
  examplesPerPass?: number;
  /**
   * Copies of an input per backward pass at most (default {@link copiesPerPass} of the model:
   * a 1.5 GiB budget); examples and then classes are split to stay within it.
   */
  copiesPerPass?: number;
}

/**
 * The true local Lipschitz constant of the whole classifier at each example: the largest
 * singular value of the exact C x D input Jacobian (C = classes), computed in float64 as the
 * square root of the largest eigenvalue of the C x C Gram matrix J J^T.
 *
 * Input space: ViT, the image pixels (D = H * W * channels). Text, the embedded sequence
 * entering block 0 (model.embed, differentiated through forwardFromEmbeddings), with only the
 * real-token rows as input directions (D = realTokens * dModel); padding rows stay fixed.
 *
 * @param model a ViT or text classifier (inference mode).
 * @param x ViT: float32 images [B, H, W, C] / [B, H*W*C] / [B, H, W]; text: int32 ids [B, n].
 * @returns Float64Array [B] of ||D logits / D input||_2. Leaves numTensors unchanged.
 * @throws RangeError on malformed inputs, a mask for a ViT, a mask of the wrong shape or a
 *   sequence without real tokens, or a bad examplesPerPass.
 */
export function networkLipschitz(
  model: TransformerClassifier,
  x: tf.Tensor,
  options: NetworkLipschitzOptions = {},
): Float64Array {
  const b = x.shape[0] as number;
  const classes = model.config.classes;
  const out = new Float64Array(b);
  const mask = options.mask ?? null;
  const cfg = model.config;
  const tokens =
    cfg.kind === "vit" ? (cfg.imageSize / cfg.patchSize) ** 2 + 1 : (x.shape[1] as number);
  const maxCopies = options.copiesPerPass ?? copiesPerPass(cfg, tokens);
  if (!Number.isInteger(maxCopies) || maxCopies < 1)
    throw new RangeError(
      `networkLipschitz: copiesPerPass must be a positive integer, got ${maxCopies}`,
    );
  if (model.config.kind === "vit") {
    if (mask !== null) throw new RangeError("networkLipschitz: a mask applies to text models only");
    const per = options.examplesPerPass ?? 8;
    if (!Number.isInteger(per) || per < 1)
      throw new RangeError(
        `networkLipschitz: examplesPerPass must be a positive integer, got ${per}`,
      );
    if (x.dtype !== "float32")
      throw new TypeError(`networkLipschitz: images must be float32, got ${x.dtype}`);
    const logitsFn: LogitsFn = (z) => model.forward(z).logits;
    const examples = Math.max(1, Math.min(per, Math.floor(maxCopies / classes)));
    for (let start = 0; start < b; start += examples) {
      const k = Math.min(examples, b - start);
      const chunk = tf.slice(x, [start], [k]);
      try {
        batchedInputJacobians(logitsFn, chunk, classes, maxCopies).forEach(
          (j, e) => (out[start + e] = spectralNorm(j.data, j.rows, j.cols)),
        );
      } finally {
        chunk.dispose();
      }
    }
    return out;
  }
  if (x.rank !== 2)
    throw new RangeError(`networkLipschitz: ids must be [B, n], got [${x.shape.join(", ")}]`);
  const n = x.shape[1] as number;
  if (mask !== null && (mask.rank !== 2 || mask.shape[0] !== b || mask.shape[1] !== n))
    throw new RangeError(
      `networkLipschitz: mask must be [${b}, ${n}], got [${mask.shape.join(", ")}]`,
    );
  const maskData = mask === null ? null : mask.dataSync();
  const d = model.config.dModel;
  for (let e = 0; e < b; e++) {
    const rows: number[] = [];
    for (let i = 0; i < n; i++) if (maskData === null || maskData[e * n + i] !== 0) rows.push(i);
    if (rows.length === 0) throw new RangeError(`networkLipschitz: example ${e} has no real token`);
    const r = rows.length;
    const sel = new Float32Array(n * r);
    rows.forEach((row, i) => (sel[row * r + i] = 1));
    const keep = new Float32Array(n);
    rows.forEach((row) => (keep[row] = 1));
    const [scatter, padPart, point, maskRow] = tf.tidy(() => {
      const seq = tf.reshape(model.embed(tf.slice(x, [e, 0], [1, n])), [n, d]);
      const st = tf.tensor2d(sel, [n, r]);
      const pad = tf.mul(seq, tf.reshape(tf.sub(1, tf.tensor1d(keep)), [n, 1]));
      const pt = tf.reshape(tf.matMul(st, seq, true, false), [1, r, d]);
      return [st, pad, pt, tf.tensor2d(keep, [1, n])];
    });
    try {
      const logitsFn: LogitsFn = (es) => {
        const copies = es.shape[0] as number;
        const seq = tf.add(
          tf.reshape(padPart, [1, n, d]),
          tf.matMul(tf.tile(tf.reshape(scatter, [1, n, r]), [copies, 1, 1]), es),
        );
        const m = mask === null ? null : tf.tile(maskRow, [copies, 1]);
        return model.forwardFromEmbeddings(seq, { mask: m }).logits;
      };
      const j = inputJacobian(logitsFn, point, classes, maxCopies);
      out[e] = spectralNorm(j.data, j.rows, j.cols);
    } finally {
      tf.dispose([scatter, padPart, point, maskRow]);
    }
  }
  return out;
}
