import type { DecodedTensor } from "../io/safetensors.ts";
import type { NamedArray } from "../nn/params.ts";
import { HfImportError, TensorReader, type TensorEntry } from "./types.ts";

/**
 * Hugging Face tensors to attnlip parameters and back, by each architecture's table of
 * {@link TensorEntry} (types.ts says what each layout means).
 */
export type { TensorEntry } from "./types.ts";

/** An nn.Linear weight [out, in] as [in, out] (and back: the same operation). */
export function transposed(t: { data: Float32Array; shape: readonly number[] }): NamedArray {
  const [rows, cols] = t.shape;
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = t.data[r * cols + c];
  return { data: out, shape: [cols, rows] };
}

/** Columns [start, start + count) of [rows, cols] (1-D: entries). */
function columns(t: { data: Float32Array; shape: readonly number[] }, start: number, count: number): NamedArray {
  if (t.shape.length === 1) return { data: t.data.slice(start, start + count), shape: [count] };
  const [rows, cols] = t.shape;
  const out = new Float32Array(rows * count);
  for (let r = 0; r < rows; r++) out.set(t.data.subarray(r * cols + start, r * cols + start + count), r * count);
  return { data: out, shape: [rows, count] };
}

/** Parameters side by side ([rows, c_i] -> [rows, sum c_i]; 1-D: concatenated). */
function sideBySide(parts: readonly NamedArray[]): NamedArray {
  const total = parts.reduce((n, p) => n + (p.shape.length === 1 ? p.shape[0] : p.shape[1]), 0);
  const rows = parts[0].shape.length === 1 ? 1 : parts[0].shape[0];
  const data = new Float32Array(rows * total);
  let start = 0;
  for (const p of parts) {
    const c = p.shape.length === 1 ? p.shape[0] : p.shape[1];
    for (let r = 0; r < rows; r++) data.set(p.data.subarray(r * c, (r + 1) * c), r * total + start);
    start += c;
  }
  return { data, shape: parts[0].shape.length === 1 ? [total] : [rows, total] };
}

/** Conv2d [d, c, p, p] -> [p * p * c, d] with rows in (py, px, channel) order. */
function convPatches(t: { data: Float32Array; shape: readonly number[] }): NamedArray {
  const [d, c, p] = t.shape;
  const out = new Float32Array(p * p * c * d);
  for (let o = 0; o < d; o++)
    for (let ch = 0; ch < c; ch++)
      for (let py = 0; py < p; py++)
        for (let px = 0; px < p; px++) out[((py * p + px) * c + ch) * d + o] = t.data[((o * c + ch) * p + py) * p + px];
  return { data: out, shape: [p * p * c, d] };
}

/** attnlip's patch map [p * p * c, d] back to the Conv2d weight [d, c, p, p]. */
function patchesToConv(t: NamedArray, shape: readonly number[]): NamedArray {
  const [d, c, p] = shape;
  const out = new Float32Array(d * c * p * p);
  for (let o = 0; o < d; o++)
    for (let ch = 0; ch < c; ch++)
      for (let py = 0; py < p; py++)
        for (let px = 0; px < p; px++) out[((o * c + ch) * p + py) * p + px] = t.data[((py * p + px) * c + ch) * d + o];
  return { data: out, shape: [...shape] };
}

/**
 * attnlip's parameters from a file's tensors by the table (shapes checked, weights finite);
 * tensors the table does not name are refused unless `ignored` accepts them (buffers that carry
 * no weight, e.g. GPT-2's attn.bias masks in older files).
 *
 * @throws HfImportError naming a missing, mis-shaped or non-finite tensor, or tensors the
 *   architecture does not use.
 * @example importTensors(entries, tensors, "ViTForImageClassification", "analyze: DIR")
 */
export function importTensors(
  entries: readonly TensorEntry[],
  tensors: ReadonlyMap<string, DecodedTensor>,
  architecture: string,
  who: string,
  ignored: (name: string) => boolean = () => false,
): Map<string, NamedArray> {
  const r = new TensorReader(tensors, who);
  const out = new Map<string, NamedArray>();
  for (const e of entries) {
    const t = r.get(e.hf, e.shape);
    if (e.layout === "same") out.set(e.at as string, { data: t.data, shape: e.atShape ?? [...e.shape] });
    else if (e.layout === "transpose") out.set(e.at as string, transposed(t));
    else if (e.layout === "conv") out.set(e.at as string, convPatches(t));
    else {
      const names = e.at as string[];
      const width = (e.shape.length === 1 ? e.shape[0] : e.shape[1]) / names.length;
      names.forEach((name, k) => out.set(name, columns(t, k * width, width)));
    }
  }
  for (const name of tensors.keys()) if (ignored(name)) r.used.add(name);
  const unused = r.unused();
  if (unused.length > 0)
    throw new HfImportError(
      `${who}: model.safetensors holds tensors a ${architecture} does not use (${unused.slice(0, 5).join(", ")}${unused.length > 5 ? `, and ${unused.length - 5} more` : ""}); attnlip refuses to drop them silently`,
    );
  return out;
}

/**
 * The file's tensors from attnlip's parameters by the table (the inverse of
 * {@link importTensors}).
 *
 * @throws Error naming a parameter the weights lack.
 * @example exportTensors(entries, model.getWeights()).get("classifier.weight")!.shape // [classes, d]
 */
export function exportTensors(entries: readonly TensorEntry[], weights: ReadonlyMap<string, NamedArray>): Map<string, NamedArray> {
  const get = (name: string) => {
    const t = weights.get(name);
    if (t === undefined) throw new Error(`export: the model has no parameter "${name}"`);
    return t;
  };
  const out = new Map<string, NamedArray>();
  for (const e of entries) {
    let t: NamedArray;
    if (e.layout === "same") t = { data: get(e.at as string).data, shape: [...e.shape] };
    else if (e.layout === "transpose") t = transposed(get(e.at as string));
    else if (e.layout === "conv") t = patchesToConv(get(e.at as string), e.shape);
    else t = sideBySide((e.at as string[]).map(get));
    out.set(e.hf, t);
  }
  return out;
}
