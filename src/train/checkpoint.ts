import { existsSync, readFileSync } from "node:fs";
import { mkdir, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { createModel, type Model } from "../nn/create.ts";
import { ConfigError, parseModelConfig, type ModelConfig } from "../nn/config.ts";
import type { NamedArray } from "../nn/params.ts";
import { InputError } from "../util/errors.ts";
import { encodeSafetensors, SafetensorsError, type TensorToWrite } from "../io/safetensors.ts";
import { readSafetensors } from "../io/safetensorsFile.ts";
import { writeJsonAtomically } from "../io/atomicWrite.ts";
import { DuplicateKeyError, parseJsonStrict } from "../io/strictJson.ts";
import { TrainStateSchema, type TrainState } from "./trainState.ts";
import type { AdamW, AdamWState } from "./optimizer.ts";
import { WordTokenizer, type TextTokenizer } from "../data/text/tokenizer.ts";
import { HfTokenizer } from "../hf/tokenizer.ts";
import { hfPadTokenId } from "../hf/types.ts";
import {
  decodeFingerprints,
  encodeFingerprints,
  fingerprintDigest,
  type FingerprintInput,
  type Fingerprints,
} from "../data/fingerprints.ts";
import { firstIssue } from "../util/zodIssue.ts";

/**
 * Training checkpoints: a folder holding
 *
 *   config.json            the model configuration (parseModelConfig's output)
 *   model.safetensors      the parameters, F32, named as model.params (metadata: step)
 *   optimizer.safetensors  AdamW moments "m.<param>" and "v.<param>", F32 (metadata: step)
 *   train_state.json       {@link TrainState}: epoch, step, seed, data, settings, RNG state
 *   tokenizer.json         text models only: the vocabulary (data/text/tokenizer.ts), or the
 *                          Hugging Face tokenizer.json of a fine-tuned imported model
 *   hf_config.json         a fine-tuned Hugging Face model only: its config.json (src/hf/)
 *   fingerprints.json      the training inputs' fingerprints (data/fingerprints.ts), so that
 *                          evaluation leaves them out of any data (absent in older checkpoints)
 *
 * A checkpoint is replaced as a whole: every file is first written (and fsynced) under a
 * temporary name, then a commit journal `checkpoint.commit.json` is written atomically, then
 * the files are renamed over the old ones and the journal removed. An interruption before the
 * journal exists leaves the previous checkpoint untouched (stray `*.tmp` files are ignored);
 * one after it is completed ("rolled forward") by the next {@link loadCheckpoint} or save. The
 * metadata step of both safetensors files must equal train_state.json's step, so a mixed set
 * is refused rather than loaded.
 */

/** A broken, truncated or inconsistent checkpoint folder (an InputError: one clear line). */
export class CheckpointError extends InputError {
  override name = "CheckpointError";
}

export const CHECKPOINT_FILES = [
  "config.json",
  "model.safetensors",
  "optimizer.safetensors",
  "train_state.json",
] as const;
/** Files a checkpoint may hold besides {@link CHECKPOINT_FILES} (text models: the tokenizer). */
export const OPTIONAL_CHECKPOINT_FILES = [
  "tokenizer.json",
  "fingerprints.json",
  "hf_config.json",
] as const;
type CheckpointFile =
  (typeof CHECKPOINT_FILES)[number] | (typeof OPTIONAL_CHECKPOINT_FILES)[number];
const ALL_FILES: readonly string[] = [...CHECKPOINT_FILES, ...OPTIONAL_CHECKPOINT_FILES];
const JOURNAL = "checkpoint.commit.json";
const TMP = ".tmp";

export { TrainStateSchema, type TrainState } from "./trainState.ts";

/** What fingerprints.json holds: the distinct training inputs' fingerprints (data/fingerprints.ts). */
const FingerprintFileSchema = z.strictObject({
  format: z.literal("attnlip-fingerprints"),
  version: z.literal(1),
  /** What each fingerprint hashes: the model input of one training example. */
  input: z.enum(["float32-pixels", "int32-token-ids"]),
  /** First 64 bits of SHA-256 of the input's little-endian bytes. */
  hash: z.literal("sha256-64"),
  /** Distinct training inputs (a run trains on at least one). */
  count: z.number().int().min(1),
  /** The fingerprints, 8 bytes each, sorted, base64. */
  fingerprints: z.string(),
});

/** The training inputs a checkpoint records, as {@link saveCheckpoint} takes and {@link loadCheckpoint} returns them. */
export interface TrainingInputs {
  /** What the fingerprints hash. */
  input: FingerprintInput;
  /** The distinct training inputs' fingerprints. */
  fingerprints: Fingerprints;
}

/** A loaded checkpoint. The caller owns (and disposes) the model. */
export interface LoadedCheckpoint {
  model: Model;
  config: ModelConfig;
  trainState: TrainState;
  /** Text models: the tokenizer of tokenizer.json (null when the checkpoint has none). */
  tokenizer: TextTokenizer | null;
  /** A fine-tuned Hugging Face model's config.json (hf_config.json; null otherwise). */
  hfConfig: Record<string, unknown> | null;
  /** The training inputs of fingerprints.json (null: an older checkpoint without it). */
  trainingInputs: TrainingInputs | null;
}

function fail(dir: string, what: string): never {
  throw new CheckpointError(`checkpoint ${dir}: ${what}`);
}

async function writeDurably(path: string, data: string | Uint8Array): Promise<void> {
  const handle = await open(path, "w");
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function syncFolder(dir: string): Promise<void> {
  try {
    const handle = await open(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Some platforms cannot fsync a folder; the renames are still atomic one by one.
  }
}

/**
 * Completes an interrupted commit: when the journal exists, renames each of its temporary
 * files that still exists over its final name, then removes the journal. Idempotent.
 *
 * @returns whether a journal was found.
 * @throws CheckpointError when the journal is unreadable; file-system errors.
 */
export async function recoverCheckpoint(dir: string): Promise<boolean> {
  const journal = join(dir, JOURNAL);
  if (!existsSync(journal)) return false;
  let files: unknown;
  try {
    files = (parseJsonStrict(await readFile(journal, "utf8")) as { files?: unknown } | null)?.files;
  } catch (e) {
    const why =
      e instanceof DuplicateKeyError
        ? `: ${e.message}`
        : ` is not valid JSON (${(e as Error).message})`;
    fail(dir, `${JOURNAL}${why}; remove it to keep the previous checkpoint`);
  }
  if (!Array.isArray(files) || !files.every((f) => ALL_FILES.includes(f)))
    fail(
      dir,
      `${JOURNAL} does not list checkpoint files; remove it to keep the previous checkpoint`,
    );
  for (const f of files as string[])
    if (existsSync(join(dir, f + TMP))) await rename(join(dir, f + TMP), join(dir, f));
  await syncFolder(dir);
  await rm(journal, { force: true });
  return true;
}

function toSafetensors(weights: Map<string, NamedArray>, prefix = ""): Map<string, TensorToWrite> {
  const out = new Map<string, TensorToWrite>();
  for (const [name, w] of weights) out.set(prefix + name, { data: w.data, shape: w.shape });
  return out;
}

/**
 * Writes a complete checkpoint of `model`, `optimizer` and `state` (and, for text models,
 * `tokenizer` as tokenizer.json; the training inputs' fingerprints as fingerprints.json) to `dir` (created when missing), replacing the previous one
 * as a whole (see the module comment).
 *
 * @throws file-system errors (the previous checkpoint is then still intact or recoverable).
 */
export async function saveCheckpoint(
  dir: string,
  parts: {
    model: Model;
    optimizer: AdamW;
    state: TrainState;
    tokenizer?: TextTokenizer | null;
    trainingInputs?: TrainingInputs | null;
    /** A fine-tuned Hugging Face model's config.json, saved as hf_config.json. */
    hfConfig?: Record<string, unknown> | null;
  },
): Promise<void> {
  await mkdir(dir, { recursive: true });
  await recoverCheckpoint(dir);
  const meta = {
    format: "attnlip",
    step: String(parts.state.step),
    epoch: String(parts.state.epoch),
  };
  const opt = parts.optimizer.getState();
  const optTensors = new Map([...toSafetensors(opt.m, "m."), ...toSafetensors(opt.v, "v.")]);
  const contents: Partial<Record<CheckpointFile, string | Uint8Array>> = {
    "config.json": JSON.stringify(parts.model.config, null, 2) + "\n",
    "model.safetensors": encodeSafetensors(toSafetensors(parts.model.getWeights()), meta),
    "optimizer.safetensors": encodeSafetensors(optTensors, {
      ...meta,
      optimizerStep: String(opt.step),
    }),
    "train_state.json": JSON.stringify(parts.state, null, 2) + "\n",
  };
  if (parts.tokenizer) contents["tokenizer.json"] = JSON.stringify(parts.tokenizer.toJSON()) + "\n";
  if (parts.hfConfig) contents["hf_config.json"] = JSON.stringify(parts.hfConfig, null, 2) + "\n";
  if (parts.trainingInputs) {
    const { input, fingerprints } = parts.trainingInputs;
    const file: z.input<typeof FingerprintFileSchema> = {
      format: "attnlip-fingerprints",
      version: 1,
      input,
      hash: "sha256-64",
      count: fingerprints.size,
      fingerprints: encodeFingerprints(fingerprints),
    };
    contents["fingerprints.json"] = JSON.stringify(file) + "\n";
  }
  const files = Object.keys(contents) as CheckpointFile[];
  for (const f of files) await writeDurably(join(dir, f + TMP), contents[f]!);
  await syncFolder(dir);
  await writeJsonAtomically(join(dir, JOURNAL), { files });
  await recoverCheckpoint(dir);
}

async function readJson(dir: string, file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(join(dir, file), "utf8");
  } catch (e) {
    fail(dir, `cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    // Strict: a key written twice (JSON.parse would keep the last value silently) is refused.
    return parseJsonStrict(text);
  } catch (e) {
    if (e instanceof DuplicateKeyError) fail(dir, `${file}: ${e.message}`);
    fail(dir, `${file} is not valid JSON (${(e as Error).message}; truncated?)`);
  }
}

async function checkFolder(dir: string): Promise<void> {
  let isDir = false;
  try {
    isDir = (await stat(dir)).isDirectory();
  } catch {
    fail(dir, "no such folder");
  }
  if (!isDir) fail(dir, "not a folder");
  await recoverCheckpoint(dir);
  const missing = CHECKPOINT_FILES.filter((f) => !existsSync(join(dir, f)));
  if (missing.length > 0) {
    // A folder of runs (the demo's runs/demo, a study's runs/): name the checkpoints inside it.
    const inside = (await readdir(dir, { withFileTypes: true }))
      .filter(
        (e) => e.isDirectory() && CHECKPOINT_FILES.every((f) => existsSync(join(dir, e.name, f))),
      )
      .map((e) => `${e.name}/`)
      .sort();
    fail(
      dir,
      inside.length > 0
        ? `not a checkpoint itself, but it holds ${inside.length === 1 ? "one" : inside.length}: ${inside.slice(0, 5).join(", ")}${inside.length > 5 ? ", ..." : ""}; give one of them, e.g. ${join(dir, inside[0].slice(0, -1))}`
        : `missing ${missing.join(", ")} (not a training checkpoint, or an incomplete copy)`,
    );
  }
}

function metadataStep(
  dir: string,
  file: string,
  metadata: Record<string, string>,
  step: number,
): void {
  if (metadata.step !== String(step))
    fail(
      dir,
      `${file} is from step ${metadata.step ?? "(none)"} but train_state.json from step ${step} (mixed checkpoint files)`,
    );
}

async function readTensors(
  dir: string,
  file: string,
  expectedShapes: Map<string, number[]>,
): Promise<{ tensors: Map<string, NamedArray>; metadata: Record<string, string> }> {
  try {
    const { tensors, metadata } = await readSafetensors(join(dir, file), {
      expectedShapes,
      name: file,
    });
    return { tensors, metadata };
  } catch (e) {
    if (e instanceof SafetensorsError) fail(dir, e.message);
    fail(dir, `cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
}

/**
 * Loads a checkpoint folder written by {@link saveCheckpoint} (completing an interrupted
 * commit first): the model with its trained weights, its config and the training state.
 *
 * @returns {model, config, trainState}; the caller owns the model (dispose it).
 * @throws CheckpointError (an InputError, one line naming the folder) when the folder or a
 *   file is missing, a JSON file (or a safetensors header) is invalid, truncated or names a
 *   key twice (the message names the file and the key), config.json is not a valid model
 *   config, train_state.json does not match {@link TrainStateSchema}, model.safetensors is
 *   malformed or its tensors do not match the config's names and shapes, the files come
 *   from different steps, or a text model's tokenizer.json is missing, invalid or larger than
 *   the model's vocabulary, or fingerprints.json is malformed.
 */
export async function loadCheckpoint(dir: string): Promise<LoadedCheckpoint> {
  await checkFolder(dir);
  let config: ModelConfig;
  try {
    config = parseModelConfig(await readJson(dir, "config.json"));
  } catch (e) {
    if (e instanceof ConfigError) fail(dir, `config.json: ${e.message}`);
    throw e;
  }
  const stateJson = await readJson(dir, "train_state.json");
  const parsed = TrainStateSchema.safeParse(stateJson);
  if (!parsed.success) fail(dir, `train_state.json: ${firstIssue(parsed.error, stateJson)}`);
  const trainState = parsed.data;
  const model = createModel(config, trainState.seed);
  try {
    const expected = new Map(model.params.entries().map(([n, v]) => [n, v.shape.slice()]));
    const { tensors, metadata } = await readTensors(dir, "model.safetensors", expected);
    metadataStep(dir, "model.safetensors", metadata, trainState.step);
    model.setWeights(tensors);
    const hfConfig = existsSync(join(dir, "hf_config.json"))
      ? await readJson(dir, "hf_config.json")
      : null;
    if (hfConfig !== null && (typeof hfConfig !== "object" || Array.isArray(hfConfig)))
      fail(dir, "hf_config.json: not a JSON object");
    if ((hfConfig === null) === (trainState.pretrained?.source === "huggingface"))
      fail(
        dir,
        hfConfig === null
          ? "missing hf_config.json (train_state.json says the run fine-tunes a Hugging Face model)"
          : "hf_config.json is there, but train_state.json records no Hugging Face model",
      );
    let tokenizer: TextTokenizer | null = null;
    if (config.kind === "text") {
      if (!existsSync(join(dir, "tokenizer.json")))
        fail(dir, "missing tokenizer.json (a text model needs its vocabulary)");
      const json = await readJson(dir, "tokenizer.json");
      try {
        if (hfConfig === null) tokenizer = WordTokenizer.fromJSON(json);
        else {
          if (typeof json !== "object" || json === null || Array.isArray(json))
            throw new Error("tokenizer.json: not a JSON object");
          tokenizer = HfTokenizer.fromJSON(
            json as Record<string, unknown>,
            config.maxLength,
            hfPadTokenId(hfConfig as Record<string, unknown>),
            "tokenizer.json",
          );
        }
      } catch (e) {
        fail(dir, (e as Error).message);
      }
      if (tokenizer.size > config.vocabSize || tokenizer.maxLength > config.maxLength)
        fail(
          dir,
          `tokenizer.json: ${tokenizer.size} tokens / length ${tokenizer.maxLength} do not fit the model (vocabSize ${config.vocabSize}, maxLength ${config.maxLength})`,
        );
    }
    const recordedInputs = trainState.data.fingerprints;
    if (recordedInputs !== undefined && !existsSync(join(dir, "fingerprints.json")))
      fail(
        dir,
        `missing fingerprints.json (train_state.json records ${recordedInputs.count} training-input fingerprints; without them a copy of the training data cannot be recognised)`,
      );
    const trainingInputs = existsSync(join(dir, "fingerprints.json"))
      ? await readTrainingInputs(dir, config, recordedInputs)
      : null;
    return {
      model,
      config,
      trainState,
      tokenizer,
      trainingInputs,
      hfConfig: hfConfig as Record<string, unknown> | null,
    };
  } catch (e) {
    model.dispose();
    throw e;
  }
}

/** Reads and checks fingerprints.json: its schema, its size, and that it hashes this model's kind of input. */
async function readTrainingInputs(
  dir: string,
  config: ModelConfig,
  recorded: TrainState["data"]["fingerprints"],
): Promise<TrainingInputs> {
  const fingerprintsJson = await readJson(dir, "fingerprints.json");
  const parsed = FingerprintFileSchema.safeParse(fingerprintsJson);
  if (!parsed.success)
    fail(dir, `fingerprints.json: ${firstIssue(parsed.error, fingerprintsJson)}`);
  const file = parsed.data;
  const expected: FingerprintInput = config.kind === "text" ? "int32-token-ids" : "float32-pixels";
  if (file.input !== expected)
    fail(
      dir,
      `fingerprints.json: input "${file.input}", a ${config.kind} model's training inputs are "${expected}"`,
    );
  let fingerprints: Set<string>;
  try {
    fingerprints = decodeFingerprints(file.fingerprints, file.count);
  } catch (e) {
    fail(dir, `fingerprints.json: ${(e as Error).message}`);
  }
  if (
    recorded !== undefined &&
    (recorded.count !== fingerprints.size || recorded.digest !== fingerprintDigest(fingerprints))
  )
    fail(
      dir,
      `fingerprints.json holds ${fingerprints.size} fingerprints (${fingerprintDigest(fingerprints)}), train_state.json records ${recorded.count} (${recorded.digest}); edited or mixed checkpoint files`,
    );
  return { input: file.input, fingerprints };
}

/**
 * Reads the AdamW state of a checkpoint for `model` (whose parameter names and shapes it must
 * match) and checks it belongs to the same step as train_state.json.
 *
 * @throws CheckpointError as {@link loadCheckpoint}.
 */
export async function loadOptimizerState(
  dir: string,
  model: Model,
  trainState: TrainState,
): Promise<AdamWState> {
  const expected = new Map<string, number[]>();
  for (const [n, v] of model.params.entries()) {
    expected.set(`m.${n}`, v.shape.slice());
    expected.set(`v.${n}`, v.shape.slice());
  }
  const { tensors, metadata } = await readTensors(dir, "optimizer.safetensors", expected);
  metadataStep(dir, "optimizer.safetensors", metadata, trainState.step);
  const optimizerStep = Number(metadata.optimizerStep);
  if (!Number.isInteger(optimizerStep) || optimizerStep < 0)
    fail(
      dir,
      `optimizer.safetensors: metadata optimizerStep "${metadata.optimizerStep}" is not an integer >= 0`,
    );
  const pick = (prefix: string) =>
    new Map(
      [...tensors]
        .filter(([k]) => k.startsWith(prefix))
        .map(([k, t]) => [k.slice(prefix.length), t]),
    );
  return { step: optimizerStep, m: pick("m."), v: pick("v.") };
}

/** Whether `dir` holds (the files of) a checkpoint. */
export function isCheckpointFolder(dir: string): boolean {
  return CHECKPOINT_FILES.some((f) => existsSync(join(dir, f))) || existsSync(join(dir, JOURNAL));
}

/**
 * The training state of the checkpoint in `dir` as {@link loadCheckpoint} would read it, read
 * without changing anything (a commit under way is not completed: while its journal exists, the
 * new train_state.json is read from its temporary file, which the next load renames into place).
 * Synchronous, for a message at once (e.g. when training is interrupted).
 *
 * @returns the state, or null when `dir` holds no valid train_state.json.
 * @example readSavedTrainState("runs/base")?.epoch // 2
 */
export function readSavedTrainState(dir: string): TrainState | null {
  const read = (file: string): TrainState | null => {
    try {
      const parsed = TrainStateSchema.safeParse(JSON.parse(readFileSync(join(dir, file), "utf8")));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  };
  const committing =
    existsSync(join(dir, JOURNAL)) && existsSync(join(dir, `train_state.json${TMP}`));
  return (committing ? read(`train_state.json${TMP}`) : null) ?? read("train_state.json");
}
