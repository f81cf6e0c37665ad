import type { DecodedTensor } from "../io/safetensors.ts";
import type { ModelConfig, ModelConfigInput } from "../nn/config.ts";
import { InputError } from "../util/errors.ts";

/**
 * How one Hugging Face tensor becomes attnlip parameters and back: one table per architecture
 * (vit.ts, bert.ts, gpt2.ts), read in both directions by tensorMap.ts importTensors and
 * exportTensors, so that an import followed by an export gives the file's tensors bit
 * for bit.
 *
 * Layouts:
 * - "same": the same values in the same order (only the shape may differ, e.g. ViT's
 *   cls_token [1, 1, d] is attnlip's cls [1, d]; Conv1D weights of GPT-2 are [in, out] as
 *   attnlip's);
 * - "transpose": an nn.Linear weight [out, in] is attnlip's [in, out];
 * - "columns": a fused [in, k * out] weight (or [k * out] bias) holds k attnlip parameters side
 *   by side (GPT-2's c_attn: W_Q, W_K, W_V);
 * - "conv": a Conv2d weight [d, c, p, p] with kernel = stride is attnlip's patch map
 *   [p * p * c, d], rows in (py, px, channel) order.
 */
export interface TensorEntry {
  /** The tensor's name in model.safetensors. */
  hf: string;
  /** Its shape there. */
  shape: number[];
  /** The attnlip parameter(s) it holds ("columns": several, in order). */
  at: string | string[];
  layout: "same" | "transpose" | "columns" | "conv";
  /** attnlip's shape for "same" when it differs from `shape`. */
  atShape?: number[];
}

/**
 * What one Hugging Face architecture needs to be imported: how its config.json becomes an
 * attnlip model config, and how its tensors (the classic names found on the Hub) become the
 * model's parameters. One file per architecture, registered in architectures.ts.
 */
export interface HfArchitecture {
  /** The class name in config.json's `architectures`, e.g. "ViTForImageClassification". */
  name: string;
  /** config.json's `model_type` the class belongs to, e.g. "vit". */
  modelType: string;
  /**
   * The attnlip config for a Hugging Face config (and, where the file decides a part, e.g. a base
   * model saved with or without its pooler, the names of the file's tensors).
   *
   * @throws HfImportError naming the field and what attnlip supports when a setting has no
   *   attnlip equivalent.
   */
  config(hf: Record<string, unknown>, who: string, tensorNames?: ReadonlySet<string>): ModelConfigInput;
  /**
   * Which file tensor holds which attnlip parameters, in which layout (tensorMap.ts): read one
   * way to import, the other way to export.
   */
  tensors(config: ModelConfig): TensorEntry[];
  /**
   * A base model (ViTModel, BertModel, GPT2Model): the file has no classifier, so attnlip adds a
   * linear head on the pooled output, initialised with seed 0 (absent: false).
   */
  addsHead?: boolean;
  /** File tensors that carry no weight and are skipped on import (older files' buffers). */
  ignored?(name: string): boolean;
}

/** A Hugging Face folder attnlip cannot import, with what is wrong and what is supported. */
export class HfImportError extends InputError {
  override name = "HfImportError";
}

/** What each kind of config field holds ("size": a positive integer; "positive": a finite number > 0). */
interface FieldKinds {
  size: number;
  positive: number;
  string: string;
  boolean: boolean;
}

/**
 * A config field of a given kind, or an HfImportError naming it:
 * `WHO: config.json: "KEY" is missing` or `... "KEY" must be a KIND, got VALUE`.
 *
 * @example hfField({ hidden_size: 768 }, "hidden_size", "size", "analyze: DIR") // 768
 */
export function hfField<K extends keyof FieldKinds>(
  hf: Record<string, unknown>,
  key: string,
  kind: K,
  who: string,
  fallback?: FieldKinds[K],
): FieldKinds[K] {
  const v = key in hf ? hf[key] : fallback;
  if (v === undefined) throw new HfImportError(`${who}: config.json: "${key}" is missing`);
  const ok =
    kind === "size"
      ? typeof v === "number" && Number.isSafeInteger(v) && v > 0
      : kind === "positive"
        ? typeof v === "number" && Number.isFinite(v) && v > 0
        : typeof v === kind;
  if (!ok) {
    const want = kind === "size" ? "a positive integer" : kind === "positive" ? "a finite number > 0" : `a ${kind}`;
    // JSON.parse reads 1e400 as Infinity, which JSON.stringify would print as null.
    const got = typeof v === "number" && !Number.isFinite(v) ? `${v} (a number beyond float64's range)` : JSON.stringify(v);
    throw new HfImportError(`${who}: config.json: "${key}" must be ${want}, got ${got}`);
  }
  return v as FieldKinds[K];
}

/** The number of labels: `id2label`'s size, else `num_labels`, else 2 (the library's default). */
export function hfLabels(hf: Record<string, unknown>, who: string): number {
  const id2label = hf.id2label;
  if (id2label !== undefined && (typeof id2label !== "object" || id2label === null || Array.isArray(id2label)))
    throw new HfImportError(`${who}: config.json: "id2label" must be an object`);
  if (id2label !== undefined) return Object.keys(id2label).length;
  return hfField(hf, "num_labels", "size", who, 2);
}

/**
 * The model's own class names: `id2label`'s values in id order, or null when it has none or
 * only the library's placeholders LABEL_0, LABEL_1, ... (then the data's labels are taken in
 * sorted order, as for attnlip's own models).
 *
 * @throws HfImportError when id2label's keys are not the ids 0 .. n-1 (a key that is not a
 *   whole number, or a gap), a value is not a string, or two ids share a name (the data's
 *   labels could not be matched to ids).
 * @example hfLabelNames({ id2label: { "0": "spam", "1": "ham" } }, "analyze") // ["spam", "ham"]
 */
export function hfLabelNames(hf: Record<string, unknown>, who: string): string[] | null {
  const id2label = hf.id2label;
  if (typeof id2label !== "object" || id2label === null || Array.isArray(id2label)) return null;
  const entries = Object.entries(id2label as Record<string, unknown>);
  const names: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const v = (id2label as Record<string, unknown>)[String(i)];
    if (v === undefined) {
      const odd = entries.find(([k]) => !/^(0|[1-9]\d*)$/.test(k) || Number(k) >= entries.length);
      throw new HfImportError(
        `${who}: config.json: id2label: its keys must be the class ids 0 to ${entries.length - 1}, got key ${JSON.stringify(odd?.[0] ?? String(i))}`,
      );
    }
    if (typeof v !== "string") throw new HfImportError(`${who}: config.json: id2label["${i}"] must be a string (the class name), got ${JSON.stringify(v)}`);
    names.push(v);
  }
  const repeated = names.find((n, i) => names.indexOf(n) !== i);
  if (repeated !== undefined)
    throw new HfImportError(
      `${who}: config.json: id2label names two classes ${JSON.stringify(repeated)} (ids ${names.indexOf(repeated)} and ${names.lastIndexOf(repeated)}): each class needs its own name to be matched to the data's labels`,
    );
  if (names.every((n, i) => n === `LABEL_${i}`)) return null;
  return names;
}

/** The attnlip activation for `hidden_act`: "gelu" is exact GELU, "gelu_new" and "gelu_pytorch_tanh" the tanh form. */
export function hfActivation(hf: Record<string, unknown>, key: string, who: string): "gelu-erf" | "gelu-tanh" {
  const act = hfField(hf, key, "string", who);
  if (act === "gelu") return "gelu-erf";
  if (act === "gelu_new" || act === "gelu_pytorch_tanh") return "gelu-tanh";
  throw new HfImportError(`${who}: config.json: ${key} "${act}" is not supported (attnlip has "gelu", "gelu_new" and "gelu_pytorch_tanh")`);
}

/**
 * Reads tensors by their Hugging Face names, checking shapes, and records which were used so
 * that the importer can refuse tensors it would silently drop.
 */
export class TensorReader {
  readonly #tensors: ReadonlyMap<string, DecodedTensor>;
  readonly #who: string;
  readonly used = new Set<string>();

  constructor(tensors: ReadonlyMap<string, DecodedTensor>, who: string) {
    this.#tensors = tensors;
    this.#who = who;
  }

  /**
   * The tensor `name` with shape `shape`.
   *
   * @throws HfImportError when it is missing, has another shape, or holds a NaN or infinity
   *   (named with its first such index: such weights make every output non-finite).
   */
  get(name: string, shape: readonly number[]): DecodedTensor {
    const t = this.#tensors.get(name);
    if (t === undefined) throw new HfImportError(`${this.#who}: model.safetensors has no tensor "${name}"`);
    if (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i]))
      throw new HfImportError(`${this.#who}: tensor "${name}" has shape [${t.shape.join(", ")}], expected [${shape.join(", ")}]`);
    const bad = t.data.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0)
      throw new HfImportError(`${this.#who}: tensor "${name}" holds ${t.data[bad]} at flat index ${bad} (as ${t.dtype}); its weights must be finite`);
    this.used.add(name);
    return t;
  }

  /** Tensors never read: an importer refuses a file with any (they would be dropped silently). */
  unused(): string[] {
    return [...this.#tensors.keys()].filter((n) => !this.used.has(n));
  }
}

/**
 * Refuses a config.json setting attnlip does not compute: `who: config.json: KEY VALUE is not
 * supported (WHY)` when hf[key] is present, not null, and differs from `expected`.
 *
 * @example refuseSetting({ is_decoder: true }, "is_decoder", false, "decoder models are not imported", "analyze: DIR") // throws
 */
export function refuseSetting(hf: Record<string, unknown>, key: string, expected: unknown, why: string, who: string): void {
  if (key in hf && hf[key] !== null && hf[key] !== expected)
    throw new HfImportError(`${who}: config.json: ${key} ${JSON.stringify(hf[key])} is not supported (${why})`);
}

/** config.json's `pad_token_id` when it is a number, else null. @example hfPadTokenId({ pad_token_id: 0 }) // 0 */
export function hfPadTokenId(hf: Record<string, unknown>): number | null {
  return typeof hf.pad_token_id === "number" ? hf.pad_token_id : null;
}
