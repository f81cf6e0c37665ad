import { tf } from "../backend.ts";
import { fillNormal, fillUniform, streamFor } from "./prng.ts";

/** A parameter's values on the JS side: row-major float32 data and its shape. */
export interface NamedArray {
  data: Float32Array;
  shape: number[];
}

/**
 * What a parameter is in its layer, recorded where the layer creates it (the optimizer decays
 * "weight" only, src/train/optimizer.ts):
 * - "weight": the matrix of a linear map (attention W_Q/W_K/W_V/W_O, MLP, patch embedding,
 *   pooler, head);
 * - "bias": a linear map's offset;
 * - "norm": a LayerNorm gain or offset;
 * - "embedding": a table of vectors added or looked up, not multiplied (token, position and
 *   token-type embeddings, ViT's CLS token and position embeddings).
 */
export type ParamRole = "weight" | "bias" | "norm" | "embedding";

/** The roles, for validation and messages. */
export const PARAM_ROLES: readonly ParamRole[] = ["weight", "bias", "norm", "embedding"];

/** A parameter with its name and role, as {@link ParamStore.parameters} lists them. */
export interface Parameter {
  name: string;
  variable: tf.Variable;
  role: ParamRole;
}

/** How a parameter is initialised. */
export type Init =
  | { kind: "zeros" }
  | { kind: "ones" }
  | { kind: "normal"; std: number }
  /** Glorot/Xavier uniform: limit sqrt(6 / (fanIn + fanOut)) (Glorot & Bengio 2010). */
  | { kind: "glorot"; fanIn: number; fanOut: number };

function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Fills a new Float32Array of `size` entries as `init` says, from the (seed, name) stream. */
export function initialValues(init: Init, size: number, seed: number, name: string): Float32Array {
  const out = new Float32Array(size);
  switch (init.kind) {
    case "zeros":
      return out;
    case "ones":
      return out.fill(1);
    case "normal":
      return fillNormal(out, streamFor(seed, name), init.std);
    case "glorot":
      return fillUniform(out, streamFor(seed, name), Math.sqrt(6 / (init.fanIn + init.fanOut)));
  }
}

/**
 * A model's parameters: a flat, insertion-ordered map from dotted names (`blocks.0.attn.wq`,
 * `patch.w`, `head.b`, ...) to trainable tf.Variables, the layout a safetensors checkpoint
 * stores. Values are filled from a seeded PRNG, so the same (config, seed) gives the same
 * weights on every backend.
 */
export class ParamStore {
  readonly #vars = new Map<string, tf.Variable>();
  readonly #roles = new Map<string, ParamRole>();
  #disposed = false;

  constructor(readonly seed: number) {}

  /**
   * Creates and registers a parameter.
   *
   * @param role what it is in its layer ({@link ParamRole}), recorded for the optimizer.
   * @throws Error when `name` is already taken or the store is disposed; RangeError on an
   *   unknown role.
   * @example store.add("head.w", [d, classes], { kind: "glorot", fanIn: d, fanOut: classes }, "weight")
   */
  add(name: string, shape: number[], init: Init, role: ParamRole): tf.Variable {
    this.#check();
    if (this.#vars.has(name)) throw new Error(`params: duplicate parameter name "${name}"`);
    if (!PARAM_ROLES.includes(role))
      throw new RangeError(
        `params: parameter "${name}": unknown role ${JSON.stringify(role)}, expected one of ${PARAM_ROLES.join(", ")}`,
      );
    const values = initialValues(init, product(shape), this.seed, name);
    const initial = tf.tensor(values, shape, "float32");
    // Variable names are global to the tfjs engine: suffix a counter so models can coexist.
    const v = tf.variable(initial, true, `${name}#${nextId++}`);
    initial.dispose();
    this.#vars.set(name, v);
    this.#roles.set(name, role);
    return v;
  }

  /**
   * The role `name` was created with.
   *
   * @throws Error naming the parameter when it does not exist.
   * @example model.params.role("type") // "embedding"
   */
  role(name: string): ParamRole {
    const role = this.#roles.get(name);
    if (role === undefined) throw new Error(`params: no parameter named "${name}"`);
    return role;
  }

  /**
   * Every parameter with its name and role, in creation order (what the optimizer takes).
   *
   * @example new AdamW(model.params.parameters(), { weightDecay: 0.05 })
   */
  parameters(): Parameter[] {
    this.#check();
    return [...this.#vars].map(([name, variable]) => ({
      name,
      variable,
      role: this.#roles.get(name)!,
    }));
  }

  /**
   * The parameter called `name`.
   *
   * @throws Error naming the parameter when it does not exist.
   */
  get(name: string): tf.Variable {
    this.#check();
    const v = this.#vars.get(name);
    if (v === undefined) throw new Error(`params: no parameter named "${name}"`);
    return v;
  }

  /** Whether a parameter called `name` exists. */
  has(name: string): boolean {
    return this.#vars.has(name);
  }

  /** Parameter names in creation order. */
  names(): string[] {
    return [...this.#vars.keys()];
  }

  /** The variables in creation order (e.g. for tf.variableGrads or an optimizer's var list). */
  variables(): tf.Variable[] {
    this.#check();
    return [...this.#vars.values()];
  }

  /** (name, variable) pairs in creation order. */
  entries(): [string, tf.Variable][] {
    this.#check();
    return [...this.#vars.entries()];
  }

  /** Total number of scalar parameters. */
  count(): number {
    let n = 0;
    for (const v of this.#vars.values()) n += v.size;
    return n;
  }

  /** Copies every parameter to the JS side, in creation order. */
  getWeights(): Map<string, NamedArray> {
    this.#check();
    const out = new Map<string, NamedArray>();
    for (const [name, v] of this.#vars)
      out.set(name, {
        data: Float32Array.from(v.dataSync() as Float32Array),
        shape: v.shape.slice(),
      });
    return out;
  }

  /**
   * Assigns parameter values.
   *
   * @param weights name -> values; a Map or a plain object.
   * @param options.partial accept a subset of the parameters (default false: every parameter
   *   must be given).
   * @throws Error naming the parameter on an unknown name, a missing parameter (unless
   *   partial), a shape mismatch or a data length that does not match the shape; nothing is
   *   assigned when any check fails.
   */
  setWeights(
    weights: Map<string, NamedArray> | Record<string, NamedArray>,
    options: { partial?: boolean } = {},
  ): void {
    this.#check();
    const entries = weights instanceof Map ? [...weights.entries()] : Object.entries(weights);
    const given = new Set<string>();
    for (const [name, w] of entries) {
      const v = this.#vars.get(name);
      if (v === undefined) throw new Error(`setWeights: unknown parameter "${name}"`);
      const same = w.shape.length === v.shape.length && w.shape.every((s, i) => s === v.shape[i]);
      if (!same)
        throw new Error(
          `setWeights: "${name}" has shape [${w.shape.join(", ")}], expected [${v.shape.join(", ")}]`,
        );
      if (w.data.length !== v.size)
        throw new Error(
          `setWeights: "${name}" has ${w.data.length} values, its shape [${v.shape.join(", ")}] needs ${v.size}`,
        );
      given.add(name);
    }
    if (!options.partial) {
      const missing = this.names().filter((n) => !given.has(n));
      if (missing.length > 0)
        throw new Error(`setWeights: missing parameters ${missing.join(", ")}`);
    }
    for (const [name, w] of entries) {
      const v = this.#vars.get(name) as tf.Variable;
      tf.tidy(() => v.assign(tf.tensor(Float32Array.from(w.data), v.shape, "float32")));
    }
  }

  /** Frees every variable. Further use throws. Safe to call twice. */
  dispose(): void {
    if (this.#disposed) return;
    for (const v of this.#vars.values()) v.dispose();
    this.#vars.clear();
    this.#roles.clear();
    this.#disposed = true;
  }

  #check(): void {
    if (this.#disposed) throw new Error("params: the model has been disposed");
  }
}

let nextId = 0;
