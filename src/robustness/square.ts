import { tf } from "../backend.ts";
import { mulberry32 } from "../nn/prng.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import type { InputBatch } from "./inputSpace.ts";
import { predictWithMargins } from "./loss.ts";
import type { AttackNorm } from "./options.ts";
import type { AttackContext, AttackSpec } from "./registry.ts";

/**
 * The Square attack (Andriushchenko, Croce, Flammarion and Hein 2020), score-based: it reads
 * only the model's logits, never a gradient, so a model that masks its gradients does not
 * stop it. The loops run on the JS side (the windows are small); each query is one forward
 * pass of the inputs not yet broken.
 */

/** p_init, the fraction of an input's entries the first windows cover: 0.8, as AutoAttack runs Square. */
export const SQUARE_P_INIT = 0.8;

/**
 * The fraction p of the input's entries a window covers at iteration `iteration` of
 * `queries`: the paper's piecewise-constant schedule, halving p_init at 10, 50, 200, 500,
 * 1000, 2000, 4000, 6000 and 8000 of 10,000 iterations, rescaled to the budget (the paper's
 * code; AutoAttack's standard run keeps the 10,000-iteration breakpoints for its 5,000).
 *
 * @example squareP(0, 5000) // 0.8
 * @example squareP(2600, 5000) // 0.8 / 128 (it = 5200 of 10,000)
 */
export function squareP(iteration: number, queries: number, pInit = SQUARE_P_INIT): number {
  const it = Math.floor((iteration / queries) * 10000);
  const breaks = [10, 50, 200, 500, 1000, 2000, 4000, 6000, 8000];
  let halvings = 0;
  for (const [k, at] of breaks.entries()) if (it > at) halvings = k + 1;
  return pInit / 2 ** halvings;
}

/** How Square reads one input: an image of h rows, w columns and c channels (channels last). */
export interface SquareLayout {
  h: number;
  w: number;
  c: number;
}

/**
 * The layout of inputs [b, ...]: images [b, H, W, C] as they are; token embeddings [b, n, d]
 * as an image of n rows (tokens) and d columns (embedding entries), one channel, so a window
 * covers some consecutive entries of some consecutive tokens and the l_inf start's vertical
 * stripes give each embedding entry one sign over the whole sequence; flat inputs [b, D] as
 * one row of D entries. Other ranks: one row of all entries.
 *
 * @example squareLayout([8, 28, 28, 1]) // { h: 28, w: 28, c: 1 }
 * @example squareLayout([8, 12, 64]) // { h: 12, w: 64, c: 1 }
 */
export function squareLayout(shape: readonly number[]): SquareLayout {
  if (shape.length === 4) return { h: shape[1], w: shape[2], c: shape[3] };
  if (shape.length === 3) return { h: shape[1], w: shape[2], c: 1 };
  return { h: 1, w: shape.slice(1).reduce((a, d) => a * d, 1), c: 1 };
}

/**
 * The window of side s = max(round(sqrt(p h w)), min) (odd when `odd`, as the l_2 update
 * wants), as [rows, columns]: s x s where the input allows it; on an input with fewer than s
 * rows the window takes every row and is widened to about s^2 entries per channel, so it
 * still covers the fraction p (flat inputs: a run of entries).
 *
 * @example squareWindow(0.05, { h: 28, w: 28, c: 1 }, 1, false) // [6, 6]
 */
export function squareWindow(
  p: number,
  layout: SquareLayout,
  min: number,
  odd: boolean,
): [number, number] {
  let s = Math.max(Math.round(Math.sqrt(p * layout.h * layout.w)), min);
  if (odd && s % 2 === 0) s += 1;
  const rows = Math.min(s, layout.h);
  const columns = Math.min(layout.w, Math.max(1, Math.round((s * s) / rows)));
  return [rows, columns];
}

/** AutoAttack's eta_rectangles: concentric rectangles of weight 1 / (k + 1)^2, unit l_2 norm. */
function etaRectangles(x: number, y: number): Float64Array {
  const out = new Float64Array(x * y);
  const xc = Math.floor(x / 2) + 1;
  const yc = Math.floor(y / 2) + 1;
  let r0 = xc - 1;
  let c0 = yc - 1;
  for (let k = 0; k < Math.max(xc, yc); k++) {
    for (let r = Math.max(r0, 0); r < Math.min(r0 + 2 * k + 1, x); r++)
      for (let c = Math.max(c0, 0); c < Math.min(c0 + 2 * k + 1, y); c++)
        out[r * y + c] += 1 / (k + 1) ** 2;
    r0 -= 1;
    c0 -= 1;
  }
  return normalized(out);
}

/** v / ||v||_2 (v itself when it is 0). */
function normalized(v: Float64Array): Float64Array {
  let s = 0;
  for (const e of v) s += e * e;
  const n = Math.sqrt(s);
  if (n > 0) for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}

/**
 * The l_2 update's pattern on a window of rows x columns, unit l_2 norm: the paper's two
 * halves of concentric squares of opposite signs (AutoAttack's eta), the upper half positive;
 * on a one-row window the halves are left and right. `transpose` (square windows only) turns
 * it by 90 degrees, as the paper does at random.
 *
 * @returns row-major [rows, columns].
 * @example squareEta(3, 3, false) // upper row positive, lower two negative
 */
export function squareEta(rows: number, columns: number, transpose: boolean): Float64Array {
  const out = new Float64Array(rows * columns);
  if (rows >= 2) {
    const top = Math.floor(rows / 2);
    const upper = etaRectangles(top, columns);
    const lower = etaRectangles(rows - top, columns);
    out.set(upper, 0);
    for (let i = 0; i < lower.length; i++) out[top * columns + i] = -lower[i];
  } else if (columns >= 2) {
    const left = Math.floor(columns / 2);
    const a = etaRectangles(1, left);
    const b = etaRectangles(1, columns - left);
    out.set(a, 0);
    for (let i = 0; i < b.length; i++) out[left + i] = -b[i];
  } else out[0] = 1;
  normalized(out);
  if (!transpose || rows !== columns) return out;
  const t = new Float64Array(out.length);
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < columns; c++) t[c * rows + r] = out[r * columns + c];
  return t;
}

/** Options of {@link squareWithBatch} beyond the attack settings. */
export interface SquareOptions {
  /** p_init [{@link SQUARE_P_INIT}]. */
  pInit?: number;
  /** Gets the queries made per input [b] (the start and each iteration it took part in). */
  onQueries?: (queries: Uint32Array) => void;
}

/**
 * One batch as Square reads it: the layout of an input, its entries, the clean points x0
 * [b * size] (row-major, input after input), the entries that may move (null: all), the radius
 * and the clip to the valid range.
 */
interface SquarePoints {
  layout: SquareLayout;
  size: number;
  x0: Float32Array;
  movable: Uint8Array | null;
  eps: number;
  clamp: (v: number) => number;
}

/** -1 or 1 with equal odds, one draw of rng. */
function randomSign(rng: () => number): number {
  return rng() < 0.5 ? -1 : 1;
}

/**
 * Square's start for every input: l_inf vertical stripes of +-eps (one sign per column and
 * channel), l_2 a grid of the eta pattern with a random sign per tile and channel, scaled to
 * norm eps. Draws from each input's own stream.
 *
 * @returns the start points [b * size].
 */
function squareStart(points: SquarePoints, rngs: (() => number)[], norm: AttackNorm): Float32Array {
  const { layout, size, x0, movable, eps, clamp } = points;
  const { h, w, c } = layout;
  const index = (r: number, col: number, ch: number) => (r * w + col) * c + ch;
  const b = rngs.length;
  const best = new Float32Array(b * size);
  for (let i = 0; i < b; i++) {
    const o = i * size;
    const rng = rngs[i];
    if (norm === "linf") {
      for (let col = 0; col < w; col++)
        for (let ch = 0; ch < c; ch++) {
          const s = randomSign(rng);
          for (let r = 0; r < h; r++) {
            const k = o + index(r, col, ch);
            best[k] = movable === null || movable[k] ? clamp(x0[k] + eps * s) : x0[k];
          }
        }
    } else {
      const delta = new Float64Array(size);
      const th = Math.max(1, Math.floor(h / 5));
      const tw = Math.max(1, Math.floor(w / 5));
      const nh = Math.min(5, Math.floor(h / th));
      const nw = Math.min(5, Math.floor(w / tw));
      const r0 = Math.floor((h - nh * th) / 2);
      const c0 = Math.floor((w - nw * tw) / 2);
      for (let a = 0; a < nh; a++)
        for (let q = 0; q < nw; q++) {
          const eta = squareEta(th, tw, rng() > 0.5);
          for (let ch = 0; ch < c; ch++) {
            const s = randomSign(rng);
            for (let u = 0; u < th; u++)
              for (let v = 0; v < tw; v++)
                delta[index(r0 + a * th + u, c0 + q * tw + v, ch)] += eta[u * tw + v] * s;
          }
        }
      writeL2(best, o, x0, delta, movable, eps, clamp);
    }
  }
  return best;
}

/**
 * The l_inf update of input i: a random window of the fraction p set to x0 +- eps, one sign per
 * channel, the signs drawn again (up to 10 times, as the paper's code) while the window would
 * not change the point; written into out[at..] (which holds the input's best point).
 */
function linfUpdate(
  out: Float32Array,
  at: number,
  best: Float32Array,
  i: number,
  points: SquarePoints,
  rng: () => number,
  p: number,
): void {
  const { layout, size, x0, movable, eps, clamp } = points;
  const { h, w, c } = layout;
  const index = (r: number, col: number, ch: number) => (r * w + col) * c + ch;
  const [sh, sw] = squareWindow(p, layout, 1, false);
  const vh = Math.floor(rng() * (h - sh + 1));
  const vw = Math.floor(rng() * (w - sw + 1));
  const signs = new Int8Array(c);
  for (let attempt = 0; attempt < 10; attempt++) {
    for (let ch = 0; ch < c; ch++) signs[ch] = randomSign(rng);
    let changes = false;
    for (let r = vh; r < vh + sh && !changes; r++)
      for (let col = vw; col < vw + sw && !changes; col++)
        for (let ch = 0; ch < c; ch++) {
          const k = index(r, col, ch);
          if (
            (movable === null || movable[i * size + k]) &&
            clamp(x0[i * size + k] + eps * signs[ch]) !== best[i * size + k]
          )
            changes = true;
        }
    if (changes) break;
  }
  for (let r = vh; r < vh + sh; r++)
    for (let col = vw; col < vw + sw; col++)
      for (let ch = 0; ch < c; ch++) {
        const k = index(r, col, ch);
        if (movable === null || movable[i * size + k])
          out[at + k] = clamp(x0[i * size + k] + eps * signs[ch]);
      }
}

/**
 * Predictions and margins of points of some of a batch's inputs (one forward pass), the
 * sub-batch of those inputs kept while their number does not change; `dispose` frees it.
 */
function marginEvaluator(
  batch: InputBatch,
  truth: ArrayLike<number>,
): {
  evaluate: (
    rows: number[],
    points: Float32Array,
  ) => { predicted: Int32Array; margins: Float64Array };
  dispose: () => void;
} {
  const shape = batch.x.shape;
  let sub: InputBatch | null = null;
  let subRows: number[] = [];
  const evaluate = (rows: number[], points: Float32Array) => {
    if (sub === null || subRows.length !== rows.length) {
      if (sub !== null && sub !== batch) sub.dispose();
      sub = rows.length === batch.size ? batch : batch.select(rows);
      subRows = rows;
    }
    const t = tf.tensor(points, [rows.length, ...shape.slice(1)], "float32");
    try {
      return predictWithMargins(
        sub.logits,
        t,
        rows.map((i) => truth[i]),
      );
    } finally {
      t.dispose();
    }
  };
  const dispose = () => {
    const last = sub as InputBatch | null;
    if (last !== null && last !== batch) last.dispose();
  };
  return { evaluate, dispose };
}

/**
 * Square on one batch: the loop of {@link SQUARE_ATTACK}. Returns per input the point that
 * broke it, else the point of lowest margin found.
 *
 * @param context the batch, labels and settings (eps, norm, queries, seed, clip).
 * @returns float32, batch.x's shape (caller disposes).
 * @throws InputError on logits that define no class distribution.
 */
export function squareWithBatch(context: AttackContext, options: SquareOptions = {}): tf.Tensor {
  const { batch, labels, settings } = context;
  const { eps, norm, queries } = settings;
  const [lo, hi] = batch.clip;
  const shape = batch.x.shape;
  const b = batch.size;
  const size = shape.slice(1).reduce((a, d) => a * d, 1);
  if (eps === 0) return tf.clone(batch.x);
  const layout = squareLayout(shape);
  const points: SquarePoints = {
    layout,
    size,
    x0: Float32Array.from(batch.x.dataSync()),
    movable: movableEntries(batch),
    eps,
    clamp: (v: number) => Math.min(hi, Math.max(lo, v)),
  };
  const { x0, movable, clamp } = points;
  const truth = labels.dataSync();
  const rngs = Array.from({ length: b }, (_, i) =>
    mulberry32((settings.seed ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0),
  );
  const pInit = options.pInit ?? SQUARE_P_INIT;
  const best = squareStart(points, rngs, norm);
  const margins = new Float64Array(b);
  const done = new Uint8Array(b);
  const used = new Uint32Array(b).fill(1);
  const { evaluate, dispose } = marginEvaluator(batch, truth);
  try {
    const all = Array.from({ length: b }, (_, i) => i);
    const start = evaluate(all, best);
    for (let i = 0; i < b; i++) {
      margins[i] = start.margins[i];
      done[i] = start.predicted[i] !== truth[i] ? 1 : 0;
    }
    const candidates = new Float32Array(b * size);
    for (let it = 0; it < queries; it++) {
      const rows = all.filter((i) => !done[i]);
      if (rows.length === 0) break;
      const p = squareP(it, queries, pInit);
      rows.forEach((i, j) => {
        const at = j * size;
        candidates.set(best.subarray(i * size, (i + 1) * size), at);
        const rng = rngs[i];
        if (norm === "linf") linfUpdate(candidates, at, best, i, points, rng, p);
        else l2Update(candidates, at, best, i * size, x0, movable, rng, p, layout, eps, clamp);
      });
      const after = evaluate(rows, candidates.subarray(0, rows.length * size));
      rows.forEach((i, j) => {
        used[i]++;
        const broke = after.predicted[j] !== truth[i];
        if (broke || after.margins[j] < margins[i]) {
          margins[i] = after.margins[j];
          best.set(candidates.subarray(j * size, (j + 1) * size), i * size);
        }
        if (broke) done[i] = 1;
      });
    }
  } finally {
    dispose();
  }
  options.onQueries?.(used);
  return tf.tensor(best, shape, "float32");
}

/** 1 where an entry may move (the batch's mask applied to ones), or null when every entry may. */
function movableEntries(batch: InputBatch): Uint8Array | null {
  if (batch.mask === null) return null;
  const mask = batch.mask;
  const m = tf.tidy(() => mask(tf.onesLike(batch.x)));
  const out = Uint8Array.from(m.dataSync(), (v) => (v !== 0 ? 1 : 0));
  m.dispose();
  return out;
}

/** out[o..] = clip(x0 + eps delta / ||delta||_2) over one input's entries (x0 where delta is 0 or masked). */
function writeL2(
  out: Float32Array,
  o: number,
  x0: Float32Array,
  delta: Float64Array,
  movable: Uint8Array | null,
  eps: number,
  clamp: (v: number) => number,
): void {
  let s = 0;
  for (let k = 0; k < delta.length; k++) {
    if (movable !== null && !movable[o + k]) delta[k] = 0;
    s += delta[k] * delta[k];
  }
  const n = Math.sqrt(s);
  for (let k = 0; k < delta.length; k++)
    out[o + k] = n > 0 ? clamp(x0[o + k] + (eps * delta[k]) / n) : x0[o + k];
}

/**
 * The l_2 update of one input (the paper's Algorithm 3, as AutoAttack writes it): two random
 * windows; the perturbation's mass on the second moves to the first, which gets the eta
 * pattern with a random sign per channel plus its old content (each normalised), scaled so
 * the norm can grow towards eps; then the whole perturbation is scaled to norm eps.
 */
function l2Update(
  out: Float32Array,
  at: number,
  best: Float32Array,
  o: number,
  x0: Float32Array,
  movable: Uint8Array | null,
  rng: () => number,
  p: number,
  layout: SquareLayout,
  eps: number,
  clamp: (v: number) => number,
): void {
  const { h, w, c } = layout;
  const size = h * w * c;
  const index = (r: number, col: number, ch: number) => (r * w + col) * c + ch;
  const delta = new Float64Array(size);
  let image = 0;
  for (let k = 0; k < size; k++) {
    delta[k] = best[o + k] - x0[o + k];
    image += delta[k] * delta[k];
  }
  const [sh, sw] = squareWindow(p, layout, 3, true);
  const vh = Math.floor(rng() * (h - sh + 1));
  const vw = Math.floor(rng() * (w - sw + 1));
  const vh2 = Math.floor(rng() * (h - sh + 1));
  const vw2 = Math.floor(rng() * (w - sw + 1));
  const inWindow = (r: number, col: number, r0: number, c0: number) =>
    r >= r0 && r < r0 + sh && col >= c0 && col < c0 + sw;
  let windows = 0;
  for (let r = 0; r < h; r++)
    for (let col = 0; col < w; col++)
      if (inWindow(r, col, vh, vw) || inWindow(r, col, vh2, vw2))
        for (let ch = 0; ch < c; ch++) windows += delta[index(r, col, ch)] ** 2;
  const target = Math.sqrt(Math.max(eps * eps - image, 0) / c + windows);
  const eta = squareEta(sh, sw, rng() > 0.5);
  const fresh = new Float64Array(sh * sw * c);
  for (let ch = 0; ch < c; ch++) {
    const s = rng() < 0.5 ? -1 : 1;
    let old = 0;
    for (let u = 0; u < sh; u++)
      for (let v = 0; v < sw; v++) old += delta[index(vh + u, vw + v, ch)] ** 2;
    const oldNorm = Math.sqrt(old) + 1e-12;
    let norm = 0;
    for (let u = 0; u < sh; u++)
      for (let v = 0; v < sw; v++) {
        const value = eta[u * sw + v] * s + delta[index(vh + u, vw + v, ch)] / oldNorm;
        fresh[(u * sw + v) * c + ch] = value;
        norm += value * value;
      }
    const scale = target / (Math.sqrt(norm) + 1e-12);
    for (let u = 0; u < sh; u++) for (let v = 0; v < sw; v++) fresh[(u * sw + v) * c + ch] *= scale;
  }
  for (let u = 0; u < sh; u++)
    for (let v = 0; v < sw; v++)
      for (let ch = 0; ch < c; ch++) delta[index(vh2 + u, vw2 + v, ch)] = 0;
  for (let u = 0; u < sh; u++)
    for (let v = 0; v < sw; v++)
      for (let ch = 0; ch < c; ch++)
        delta[index(vh + u, vw + v, ch)] = fresh[(u * sw + v) * c + ch];
  const row = out.subarray(at, at + size);
  const shifted = new Float32Array(size);
  writeL2(
    shifted,
    0,
    x0.subarray(o, o + size),
    delta,
    movable === null ? null : movable.subarray(o, o + size),
    eps,
    clamp,
  );
  row.set(shifted);
}

/**
 * Square in any input space (the registered attack's run): {@link squareWithBatch} with the
 * paper's p_init of AutoAttack (0.8).
 *
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @example squareIn({ batch: imageBatch(model, x, [0, 1]), kind: "image", labels: y, settings: resolveAttackOptions({ eps: 0.1, queries: 1000 }, "me"), who: "square" })
 */
export function squareIn(context: AttackContext): tf.Tensor {
  return squareWithBatch(context);
}

/**
 * Square: the score-based Square attack, untargeted, on the margin loss.
 *
 * Paper: Andriushchenko, Croce, Flammarion and Hein 2020, "Square Attack: a query-efficient
 * black-box adversarial attack via random search", ECCV (Algorithms 1 to 3). It never reads a
 * gradient: random search over square windows, accepting a change when it lowers the margin
 * z_y - max_{i != y} z_i (or misclassifies), so it breaks models that mask their gradients.
 * Norm: l_inf (start: vertical stripes of +-eps, one sign per column and channel; step: a
 * window set to x +- eps, one sign per channel, drawn again while it would change nothing) or
 * l_2 (start: a 5 x 5 grid of the paper's eta pattern with random signs, scaled to norm eps;
 * step: the paper's pair of windows, the second's mass moved to the first, renormalised to
 * eps). The window covers a fraction p of the entries: p_init 0.8 (AutoAttack's setting;
 * the paper uses 0.05 for l_inf and 0.1 for l_2 on undefended ImageNet models) halved on the
 * paper's schedule, rescaled to the budget ({@link squareP}). Each input has its own seeded
 * stream, so a batch's result is reproducible.
 * Arguments: eps (radius, >= 0, input units), norm ["linf"], queries [5000, AutoAttack's
 * standard version; --queries sets it, e.g. 1000 to cut it for time] (iterations per input
 * after the start: each queries the inputs not yet broken once), seed [0]. steps, stepSize,
 * restarts and randomStart are not read.
 * Layout: images [b, H, W, C]; token embeddings [b, n, d] as an image of n rows (tokens) by d
 * columns (entries), one channel; flat [b, D] as one row ({@link squareLayout}); windows on
 * inputs with fewer rows than their side are widened to cover the same fraction.
 * Input range: images in the clip range ([0, 1]), every point clipped to it; token embeddings
 * unbounded, padding rows never moved. Classes masked at -inf are allowed.
 * Shapes: x float32 [b, ...], labels [b]; returns x's shape.
 */
export const SQUARE_ATTACK: AttackSpec = {
  name: "square",
  label: "Square",
  summary:
    "score-based random search over square windows (Andriushchenko et al. 2020): no gradients",
  options: {
    queries: {
      default: ATTACK_DEFAULTS.queries,
      help: "query budget per input (iterations); 5000 as in AutoAttack",
    },
    seed: { default: ATTACK_DEFAULTS.seed, help: "seed of the random windows" },
  },
  gradientFree: true,
  run: squareIn,
};
