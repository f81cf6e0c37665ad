import { tf } from "../backend.ts";
import type { NamedArray, Parameter, ParamRole } from "../nn/params.ts";

/**
 * AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization") written with tf
 * ops, so its state (moments, step) can be saved and restored exactly for resumed runs, and
 * gradient clipping by global norm.
 *
 * Update of parameter w with gradient g at step t = 1, 2, ... and learning rate lr:
 *   m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2
 *   w <- w - lr * wd * w [decayed parameters only] - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 * which is PyTorch's torch.optim.AdamW (decay applied to the pre-update weights).
 *
 * Weight decay applies to the matrices of linear maps only, by each parameter's role recorded
 * where its layer creates it (src/nn/params.ts, {@link decaysWeight}): biases, LayerNorm gains
 * and offsets and embeddings (token, position, token-type, ViT's CLS and position embeddings)
 * are not decayed, as in the ViT and BERT recipes (and minGPT's, which also decides by module
 * type rather than by name). No list of names: a new embedding is not decayed because it is
 * created as one.
 */

/** Settings of {@link AdamW}. */
export interface AdamWOptions {
  /** First-moment decay (default 0.9). */
  beta1?: number;
  /** Second-moment decay (default 0.999). */
  beta2?: number;
  /** Denominator floor (default 1e-8). */
  epsilon?: number;
  /** Decoupled weight decay coefficient wd (default 0). */
  weightDecay?: number;
}

/** The saved state of an {@link AdamW}: step count and the moments per parameter name. */
export interface AdamWState {
  step: number;
  m: Map<string, NamedArray>;
  v: Map<string, NamedArray>;
}

/**
 * Whether weight decay applies to a parameter of this role: the matrix of a linear map
 * ("weight") yes; a bias, a LayerNorm parameter or an embedding no.
 *
 * @example decaysWeight(model.params.role("type")) // false
 */
export function decaysWeight(role: ParamRole): boolean {
  return role === "weight";
}

function zerosVariable(like: tf.Tensor): tf.Variable {
  const zeros = tf.zerosLike(like);
  const v = tf.variable(zeros, false);
  zeros.dispose();
  return v;
}

/** AdamW over a fixed list of named variables. Owns its moment variables: call dispose(). */
export class AdamW {
  readonly beta1: number;
  readonly beta2: number;
  readonly epsilon: number;
  readonly weightDecay: number;
  /** Number of updates applied so far. */
  step = 0;
  readonly #names: string[];
  readonly #vars: tf.Variable[];
  readonly #m: tf.Variable[];
  readonly #v: tf.Variable[];
  readonly #decay: boolean[];

  /**
   * @param params the parameters with their roles, model.params.parameters(); or (name,
   *   variable) pairs, whose roles are unknown, when nothing is decayed (weight decay 0).
   * @throws RangeError when a setting is out of range (beta in [0, 1), epsilon > 0, weight
   *   decay >= 0), or when weight decay > 0 is asked of parameters without roles.
   * @example const opt = new AdamW(model.params.parameters(), { weightDecay: 0.05 });
   */
  constructor(params: readonly Parameter[] | readonly [string, tf.Variable][], options: AdamWOptions = {}) {
    this.beta1 = options.beta1 ?? 0.9;
    this.beta2 = options.beta2 ?? 0.999;
    this.epsilon = options.epsilon ?? 1e-8;
    this.weightDecay = options.weightDecay ?? 0;
    for (const [name, b] of [["beta1", this.beta1], ["beta2", this.beta2]] as const)
      if (!(b >= 0 && b < 1)) throw new RangeError(`AdamW: ${name} must be in [0, 1), got ${b}`);
    if (!(this.epsilon > 0)) throw new RangeError(`AdamW: epsilon must be > 0, got ${this.epsilon}`);
    if (!(this.weightDecay >= 0) || !Number.isFinite(this.weightDecay))
      throw new RangeError(`AdamW: weightDecay must be finite and >= 0, got ${this.weightDecay}`);
    const list: { name: string; variable: tf.Variable; role: ParamRole | null }[] = params.map((p) =>
      Array.isArray(p) ? { name: p[0], variable: p[1], role: null } : (p as Parameter),
    );
    const unknown = list.find((p) => p.role === null);
    if (unknown !== undefined && this.weightDecay > 0)
      throw new RangeError(
        `AdamW: weightDecay ${this.weightDecay} needs each parameter's role, "${unknown.name}" has none (pass model.params.parameters())`,
      );
    this.#names = list.map((p) => p.name);
    this.#vars = list.map((p) => p.variable);
    this.#decay = list.map((p) => p.role !== null && decaysWeight(p.role));
    this.#m = this.#vars.map(zerosVariable);
    this.#v = this.#vars.map(zerosVariable);
  }

  /** Names of the parameters that are weight-decayed. */
  decayedNames(): string[] {
    return this.#names.filter((_, i) => this.#decay[i]);
  }

  /**
   * Applies one update with learning rate `lr` (step += 1).
   *
   * @param grads one gradient per parameter, in the constructor's order, same shapes.
   * @throws RangeError when the count or a shape does not match, or lr is not finite and >= 0.
   */
  apply(grads: readonly tf.Tensor[], lr: number): void {
    if (grads.length !== this.#vars.length)
      throw new RangeError(`AdamW: got ${grads.length} gradients for ${this.#vars.length} parameters`);
    if (!Number.isFinite(lr) || lr < 0) throw new RangeError(`AdamW: lr must be finite and >= 0, got ${lr}`);
    const t = this.step + 1;
    const bc1 = 1 - Math.pow(this.beta1, t);
    const bc2 = 1 - Math.pow(this.beta2, t);
    tf.tidy(() => {
      for (let i = 0; i < this.#vars.length; i++) {
        const w = this.#vars[i];
        const g = grads[i];
        if (g.shape.length !== w.shape.length || g.shape.some((d, k) => d !== w.shape[k]))
          throw new RangeError(
            `AdamW: gradient of "${this.#names[i]}" has shape [${g.shape.join(", ")}], expected [${w.shape.join(", ")}]`,
          );
        const m = tf.add(tf.mul(this.#m[i], this.beta1), tf.mul(g, 1 - this.beta1));
        const v = tf.add(tf.mul(this.#v[i], this.beta2), tf.mul(tf.square(g), 1 - this.beta2));
        const update = tf.div(tf.div(m, bc1), tf.add(tf.sqrt(tf.div(v, bc2)), this.epsilon));
        const decayed = this.#decay[i] && this.weightDecay > 0 ? tf.sub(w, tf.mul(w, lr * this.weightDecay)) : w;
        w.assign(tf.sub(decayed, tf.mul(update, lr)));
        this.#m[i].assign(m);
        this.#v[i].assign(v);
      }
    });
    this.step = t;
  }

  /** Copies the state (step, moments by parameter name) to the JS side. */
  getState(): AdamWState {
    const copy = (vars: tf.Variable[]) =>
      new Map(
        vars.map((v, i) => [
          this.#names[i],
          { data: Float32Array.from(v.dataSync() as Float32Array), shape: v.shape.slice() },
        ]),
      );
    return { step: this.step, m: copy(this.#m), v: copy(this.#v) };
  }

  /**
   * Restores a state saved by {@link getState}.
   *
   * @throws RangeError naming the parameter when a moment is missing or mis-shaped, or step
   *   is not an integer >= 0; nothing is changed then.
   */
  setState(state: AdamWState): void {
    if (!Number.isInteger(state.step) || state.step < 0)
      throw new RangeError(`AdamW: step must be an integer >= 0, got ${state.step}`);
    for (const [kind, map] of [["m", state.m], ["v", state.v]] as const)
      for (let i = 0; i < this.#vars.length; i++) {
        const a = map.get(this.#names[i]);
        const shape = this.#vars[i].shape;
        if (a === undefined) throw new RangeError(`AdamW: state has no ${kind} for "${this.#names[i]}"`);
        if (a.shape.length !== shape.length || a.shape.some((d, k) => d !== shape[k]) || a.data.length !== this.#vars[i].size)
          throw new RangeError(
            `AdamW: ${kind} of "${this.#names[i]}" has shape [${a.shape.join(", ")}], expected [${shape.join(", ")}]`,
          );
      }
    for (let i = 0; i < this.#vars.length; i++) {
      const name = this.#names[i];
      const shape = this.#vars[i].shape;
      tf.tidy(() => {
        this.#m[i].assign(tf.tensor(Float32Array.from(state.m.get(name)!.data), shape, "float32"));
        this.#v[i].assign(tf.tensor(Float32Array.from(state.v.get(name)!.data), shape, "float32"));
      });
    }
    this.step = state.step;
  }

  /** Frees the moment variables. */
  dispose(): void {
    for (const v of [...this.#m, ...this.#v]) v.dispose();
  }
}

/**
 * Scales gradients so that their global l2 norm is at most `maxNorm` (PyTorch's
 * clip_grad_norm_: factor maxNorm / max(norm, maxNorm), so unchanged when below).
 *
 * @param grads gradients (not disposed).
 * @param maxNorm > 0, or 0 / Infinity for no clipping (the gradients are returned as clones).
 * @returns new tensors `clipped` (same order) and the pre-clipping norm, a float32 scalar.
 * @throws RangeError when maxNorm is negative or NaN.
 */
export function clipByGlobalNorm(
  grads: readonly tf.Tensor[],
  maxNorm: number,
): { clipped: tf.Tensor[]; norm: tf.Tensor } {
  if (!(maxNorm >= 0)) throw new RangeError(`clip: maxNorm must be >= 0, got ${maxNorm}`);
  return tf.tidy(() => {
    const norm = tf.sqrt(tf.addN(grads.map((g) => tf.sum(tf.square(g)))));
    if (maxNorm === 0 || maxNorm === Infinity) return { clipped: grads.map((g) => tf.clone(g)), norm };
    const scale = tf.div(maxNorm, tf.maximum(norm, maxNorm));
    return { clipped: grads.map((g) => tf.mul(g, scale)), norm };
  });
}
