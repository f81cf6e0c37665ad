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
  constructor(
    params: readonly Parameter[] | readonly [string, tf.Variable][],
    options: AdamWOptions = {},
  ) {
    this.beta1 = options.beta1 ?? 0.9;
    this.beta2 = options.beta2 ?? 0.999;
    this.epsilon = options.epsilon ?? 1e-8;
    this.weightDecay = options.weightDecay ?? 0;
    for (const [name, b] of [
      ["beta1", this.beta1],
      ["beta2", this.beta2],
    ] as const)
      if (!(b >= 0 && b < 1)) throw new RangeError(`AdamW: ${name} must be in [0, 1), got ${b}`);
    if (!(this.epsilon > 0))
      throw new RangeError(`AdamW: epsilon must be > 0, got ${this.epsilon}`);
    if (!(this.weightDecay >= 0) || !Number.isFinite(this.weightDecay))
      throw new RangeError(`AdamW: weightDecay must be finite and >= 0, got ${this.weightDecay}`);
    const list: { name: string; variable: tf.Variable; role: ParamRole | null }[] = params.map(
      (p) => (Array.isArray(p) ? { name: p[0], variable: p[1], role: null } : (p as Parameter)),
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
   * Applies one update with learning rate `lr` (step += 1). The parameters are updated one at a
   * time, each in its own tidy with its temporaries freed as soon as they are used: at most a few
   * temporaries of one parameter's size are alive at once (the largest, BERT-base's word
   * embedding, is 94 MB), never a set of temporaries for every parameter (about 12 times the
   * model, 5 GB for BERT-base, which stopped tfjs-wasm's 4 GB heap).
   *
   * @param grads one gradient per parameter, in the constructor's order, same shapes (not
   *   disposed).
   * @param gradScale a float32 scalar each gradient is multiplied by first (the clipping factor
   *   of {@link clipFactor}), one parameter at a time, so that no scaled copy of every gradient
   *   is held at once; the result is the same as applying the scaled gradients.
   * @throws RangeError when the count or a shape does not match, lr is not finite and >= 0, or
   *   gradScale is not a scalar; every check is made before any parameter changes.
   * @example optimizer.apply(grads, 1e-3, clipFactor(globalGradNorm(grads), 1) ?? undefined);
   */
  apply(grads: readonly tf.Tensor[], lr: number, gradScale?: tf.Tensor): void {
    if (grads.length !== this.#vars.length)
      throw new RangeError(
        `AdamW: got ${grads.length} gradients for ${this.#vars.length} parameters`,
      );
    if (!Number.isFinite(lr) || lr < 0)
      throw new RangeError(`AdamW: lr must be finite and >= 0, got ${lr}`);
    if (gradScale !== undefined && gradScale.size !== 1)
      throw new RangeError(
        `AdamW: gradScale must be a scalar, got shape [${gradScale.shape.join(", ")}]`,
      );
    for (let i = 0; i < this.#vars.length; i++) {
      const w = this.#vars[i].shape;
      const g = grads[i].shape;
      if (g.length !== w.length || g.some((d, k) => d !== w[k]))
        throw new RangeError(
          `AdamW: gradient of "${this.#names[i]}" has shape [${g.join(", ")}], expected [${w.join(", ")}]`,
        );
    }
    const t = this.step + 1;
    const bc1 = 1 - Math.pow(this.beta1, t);
    const bc2 = 1 - Math.pow(this.beta2, t);
    for (let i = 0; i < this.#vars.length; i++) {
      const w = this.#vars[i];
      const mv = this.#m[i];
      const vv = this.#v[i];
      // The moments first (assign frees the old value), then the weights from the new moments:
      // the same operations, on the same values, as one expression per parameter.
      tf.tidy(() => {
        const g = gradScale === undefined ? grads[i] : tf.mul(grads[i], gradScale);
        mv.assign(tf.tidy(() => tf.add(tf.mul(mv, this.beta1), tf.mul(g, 1 - this.beta1))));
        vv.assign(
          tf.tidy(() =>
            tf.add(
              tf.mul(vv, this.beta2),
              tf.tidy(() => tf.mul(tf.square(g), 1 - this.beta2)),
            ),
          ),
        );
      });
      tf.tidy(() => {
        const step = tf.tidy(() => {
          const update = tf.tidy(() => {
            const mHat = tf.div(mv, bc1);
            return tf.div(
              mHat,
              tf.tidy(() => tf.add(tf.sqrt(tf.div(vv, bc2)), this.epsilon)),
            );
          });
          return tf.mul(update, lr);
        });
        const decayed =
          this.#decay[i] && this.weightDecay > 0
            ? tf.tidy(() => tf.sub(w, tf.mul(w, lr * this.weightDecay)))
            : w;
        w.assign(tf.sub(decayed, step));
      });
    }
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
    for (const [kind, map] of [
      ["m", state.m],
      ["v", state.v],
    ] as const)
      for (let i = 0; i < this.#vars.length; i++) {
        const a = map.get(this.#names[i]);
        const shape = this.#vars[i].shape;
        if (a === undefined)
          throw new RangeError(`AdamW: state has no ${kind} for "${this.#names[i]}"`);
        if (
          a.shape.length !== shape.length ||
          a.shape.some((d, k) => d !== shape[k]) ||
          a.data.length !== this.#vars[i].size
        )
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
 * The global l2 norm of gradients, sqrt(sum of every entry squared), each gradient's sum of
 * squares taken in a tidy of its own (no squared copy of every gradient at once).
 *
 * @param grads gradients (not disposed).
 * @returns a new float32 scalar.
 * @example const norm = globalGradNorm(grads);
 */
export function globalGradNorm(grads: readonly tf.Tensor[]): tf.Tensor {
  return tf.tidy(() => tf.sqrt(tf.addN(grads.map((g) => tf.tidy(() => tf.sum(tf.square(g)))))));
}

/**
 * The factor of clipping by global norm (PyTorch's clip_grad_norm_): maxNorm / max(norm, maxNorm),
 * 1 when the norm is below maxNorm; null for no clipping.
 *
 * @param norm the gradients' global norm, a float32 scalar ({@link globalGradNorm}).
 * @param maxNorm > 0, or 0 / Infinity for no clipping (null).
 * @returns a new float32 scalar, or null.
 * @throws RangeError when maxNorm is negative or NaN.
 * @example optimizer.apply(grads, lr, clipFactor(norm, 1) ?? undefined);
 */
export function clipFactor(norm: tf.Tensor, maxNorm: number): tf.Tensor | null {
  if (!(maxNorm >= 0)) throw new RangeError(`clip: maxNorm must be >= 0, got ${maxNorm}`);
  if (maxNorm === 0 || maxNorm === Infinity) return null;
  return tf.tidy(() => tf.div(maxNorm, tf.maximum(norm, maxNorm)));
}

/**
 * Scales gradients so that their global l2 norm is at most `maxNorm` (PyTorch's
 * clip_grad_norm_: factor maxNorm / max(norm, maxNorm), so unchanged when below). It holds a
 * scaled copy of every gradient: a training step instead passes {@link clipFactor} to
 * AdamW.apply, which scales one gradient at a time.
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
    const norm = globalGradNorm(grads);
    const scale = clipFactor(norm, maxNorm);
    return { clipped: grads.map((g) => (scale === null ? tf.clone(g) : tf.mul(g, scale))), norm };
  });
}
