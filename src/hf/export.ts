import { existsSync, statSync } from "node:fs";
import { mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomically } from "../io/atomicWrite.ts";
import { encodeSafetensors } from "../io/safetensors.ts";
import type { ModelConfig } from "../nn/config.ts";
import type { NamedArray } from "../nn/params.ts";
import { InputError } from "../util/errors.ts";
import { HF_ARCHITECTURES } from "./architectures.ts";
import { exportTensors } from "./tensorMap.ts";
import { HfImportError, hfLabelNames, type HfArchitecture } from "./types.ts";
import { readJsonObject } from "./readJson.ts";
import { vitHfConfig } from "./vit.ts";

/** What a Hugging Face folder is written from. */
export interface HfExport {
  /** The architecture; a base model's (addsHead) leaves out the head attnlip added. */
  architecture: HfArchitecture;
  /** config.json to write (the imported one, or one built for an attnlip ViT). */
  hfConfig: Record<string, unknown>;
  config: ModelConfig;
  /** attnlip's parameters by name. */
  weights: ReadonlyMap<string, NamedArray>;
  /** The tokenizer.json document of a text model (null: none written). */
  tokenizer: unknown;
}

/** The subfolder of a run where `train` writes a fine-tuned Hugging Face model in its own format. */
export const HF_EXPORT_FOLDER = "hf";

/** The files {@link writeHfFolder} writes. */
export const HF_FILES = ["config.json", "model.safetensors", "tokenizer.json"] as const;

/**
 * Writes a folder that transformers' `from_pretrained` loads: config.json, model.safetensors
 * (the architecture's tensor names and layouts, in the config's `dtype` / `torch_dtype`:
 * float32 by default, float16 or bfloat16 rounded to nearest; metadata {"format": "pt"}) and,
 * for text, tokenizer.json. Importing it gives the same parameters bit for bit when they are
 * representable in that dtype, as an imported model's are (src/hf/tensorMap.ts). Each file is
 * written atomically; replacing an export removes the shards of an earlier sharded one.
 *
 * @param dir the folder (created when missing).
 * @param options.replace replace files of an earlier export (default false: refused).
 * @returns the paths written.
 * @throws InputError `WHO: --out: DIR holds FILE already` when a file exists and replace is not
 *   set, or when dir is a file; Error naming a parameter the model lacks.
 * @example await writeHfFolder("runs/bert-ft/hf", hfExportOf(...), "export");
 */
export async function writeHfFolder(dir: string, source: HfExport, who: string, options: { replace?: boolean } = {}): Promise<string[]> {
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw new InputError(`${who}: --out: ${dir} is a file; give a folder`);
  // A training checkpoint is never overwritten, --force or not: its config.json and model.safetensors are attnlip's.
  const checkpointFile = ["train_state.json", "optimizer.safetensors"].find((f) => existsSync(join(dir, f)));
  if (checkpointFile !== undefined)
    throw new InputError(`${who}: --out: ${dir} holds a training checkpoint (${checkpointFile}); an export never replaces one, choose another folder`);
  const dtype = storedDtype(source.hfConfig);
  const files = HF_FILES.filter((f) => f !== "tokenizer.json" || source.tokenizer !== null);
  if (!options.replace) {
    const there = files.find((f) => existsSync(join(dir, f)));
    if (there !== undefined)
      throw new InputError(`${who}: --out: ${dir} holds ${there} already; choose another folder or give --force to replace it`);
  }
  const tensors = exportTensors(source.architecture.tensors(source.config), source.weights);
  try {
    await mkdir(dir, { recursive: true });
  } catch (e) {
    throw new InputError(`${who}: --out: cannot create ${dir} (${(e as Error).message})`);
  }
  if (options.replace) await removeShards(dir);
  const written: string[] = [];
  const write = async (name: string, content: string | Uint8Array) => {
    try {
      await writeFileAtomically(join(dir, name), content);
    } catch (e) {
      throw new InputError(`${who}: --out: cannot write ${join(dir, name)} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    written.push(join(dir, name));
  };
  await write("model.safetensors", encodeSafetensors(tensors, { format: "pt" }, { dtype }));
  if (source.tokenizer !== null) await write("tokenizer.json", JSON.stringify(source.tokenizer, null, 2) + "\n");
  // config.json last: a folder is taken for a Hugging Face model by its config.json.
  await write("config.json", JSON.stringify(withStoredDtype(source.hfConfig, dtype), null, 2) + "\n");
  return written;
}

/** The safetensors dtype of a config's `dtype` (or older `torch_dtype`): F16, BF16, else F32. */
function storedDtype(hf: Record<string, unknown>): "F32" | "F16" | "BF16" {
  const dtype = hf.dtype ?? hf.torch_dtype;
  return dtype === "float16" ? "F16" : dtype === "bfloat16" ? "BF16" : "F32";
}

/**
 * The config with its `dtype` / `torch_dtype` naming what the weights are stored in: a dtype
 * attnlip does not write (float64, int8, ...) is stored as float32 and labelled so, since
 * the weights are attnlip's float32 values.
 *
 * @example withStoredDtype({ torch_dtype: "float64" }, "F32") // { torch_dtype: "float32" }
 */
export function withStoredDtype(hf: Record<string, unknown>, dtype: "F32" | "F16" | "BF16"): Record<string, unknown> {
  if (dtype !== "F32") return hf;
  const out = { ...hf };
  for (const key of ["dtype", "torch_dtype"]) if (typeof out[key] === "string" && out[key] !== "float32") out[key] = "float32";
  return out;
}

/** Removes an earlier sharded export's index and the shards it lists (a single file replaces them). */
async function removeShards(dir: string): Promise<void> {
  const index = join(dir, "model.safetensors.index.json");
  if (!existsSync(index)) return;
  try {
    const json = JSON.parse(await readFile(index, "utf8")) as { weight_map?: Record<string, unknown> };
    for (const file of new Set(Object.values(json.weight_map ?? {})))
      if (typeof file === "string" && /^[^/\\]+\.safetensors$/.test(file)) await rm(join(dir, file), { force: true });
  } catch {
    // An unreadable index: remove it alone.
  }
  await rm(index, { force: true });
}

/**
 * What to export from a Hugging Face folder (a round trip) or a checkpoint: a fine-tuned
 * imported model exports to its own architecture and config; an attnlip-trained pre-LN ViT to
 * ViTForImageClassification with a config built from its own. attnlip's own text models have
 * no Hugging Face architecture and are refused.
 *
 * @param loaded the model's config, parameters, Hugging Face config (null: trained by attnlip),
 *   tokenizer document and class names.
 * @throws InputError naming why the model cannot be exported.
 * @example hfExportOf({ config, weights, hfConfig: null, tokenizer: null, labels: ["0", "1"] }, "export")
 */
export function hfExportOf(
  loaded: {
    config: ModelConfig;
    weights: ReadonlyMap<string, NamedArray>;
    hfConfig: Record<string, unknown> | null;
    tokenizer: unknown;
    labels?: readonly string[];
  },
  who: string,
): HfExport {
  const { config, weights, tokenizer } = loaded;
  if (loaded.hfConfig !== null) {
    const list = loaded.hfConfig.architectures;
    const name = Array.isArray(list) && typeof list[0] === "string" ? list[0] : undefined;
    const architecture = name === undefined ? undefined : HF_ARCHITECTURES.get(name);
    if (architecture === undefined) throw new HfImportError(`${who}: its Hugging Face config names no architecture attnlip exports (${JSON.stringify(list)})`);
    return { architecture, hfConfig: withLabels(loaded.hfConfig, loaded.labels, config.classes), config, weights, tokenizer };
  }
  if (config.kind === "vit")
    return { architecture: HF_ARCHITECTURES.get("ViTForImageClassification")!, hfConfig: vitHfConfig(config, loaded.labels, who), config, weights, tokenizer: null };
  throw new InputError(
    `${who}: attnlip's own text models (its word tokenizer, a final LayerNorm on a bidirectional encoder) have no Hugging Face architecture; models imported from Hugging Face (and fine-tuned) export back, and attnlip's ViTs export as ViTForImageClassification`,
  );
}

/**
 * The config with the run's class names as id2label / label2id when the model had only the
 * placeholders LABEL_0, LABEL_1, ... (a model with names of its own was trained with them:
 * the data's labels mapped to its ids). Extra classes keep their placeholders.
 */
function withLabels(hf: Record<string, unknown>, labels: readonly string[] | undefined, classes: number): Record<string, unknown> {
  if (labels === undefined || labels.length === 0 || labels.length > classes || hfLabelNames(hf, "export") !== null) return hf;
  const names = Array.from({ length: classes }, (_, i) => labels[i] ?? `LABEL_${i}`);
  if (new Set(names).size !== names.length) return hf;
  return { ...hf, id2label: Object.fromEntries(names.map((n, i) => [String(i), n])), label2id: Object.fromEntries(names.map((n, i) => [n, i])) };
}

/**
 * The tokenizer.json document of a Hugging Face folder, or null when it has none.
 *
 * @throws HfImportError when it is not JSON.
 */
export async function readTokenizerDocument(dir: string, who: string): Promise<unknown> {
  const path = join(dir, "tokenizer.json");
  return existsSync(path) ? readJsonObject(path, `${who}: ${path}`) : null;
}
