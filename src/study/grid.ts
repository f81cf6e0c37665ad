import { existsSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { readJsonFile } from "./jsonFile.ts";
import { JASMIN_MAX_LAMBDA, JASMIN_NORMS, JASMIN_REDUCTIONS, type JasminNorm, type JasminReduce } from "../train/jasmin.ts";
import { attackNames } from "../robustness/attacks.ts";
import { InputError } from "../util/errors.ts";
import { issueReason } from "../util/zodIssue.ts";

/**
 * A study's grid: which runs exist (data x model x JaSMin lambda x JaSMin norm x reduction x
 * seed) and how each is trained, analysed and attacked. The same settings hold for every run,
 * so that runs differ only along the grid's axes; `attnlip study` saves the grid in the study
 * folder (study-grid.json) and refuses to continue a folder with another grid.
 */

const positiveInt = z.number().int().min(1);

/** How each run is trained. */
const TrainSettings = z
  .object({
    // The same limit as train --epochs (cli/trainCommand.ts EPOCHS).
    epochs: positiveInt.max(100000).default(2),
    /** Training examples (the first of the training split); null = all. */
    trainSize: positiveInt.nullable().default(null),
    /** Test examples behind the clean accuracy (the first of the held-out split); null = all, as a study's results should be. */
    testLimit: positiveInt.nullable().default(null),
    batch: positiveInt.max(4096).default(32),
    /** Peak learning rate of each run's training (with pretraining: of its fine-tuning). */
    lr: z.number().positive().max(1).default(2e-3),
    /**
     * Epochs of a model trained once per data, model and seed without JaSMin (STUDY/pretrain/),
     * which each run of that seed then fine-tunes for `epochs` with its lambda (train --init);
     * null = each run trains from scratch.
     */
    pretrainEpochs: positiveInt.max(100000).nullable().default(null),
    /** Peak learning rate of the pretraining. */
    pretrainLr: z.number().positive().max(1).default(2e-3),
    /** Image data: random shifts of the training images, at most this many pixels each way (train --augment-shift); 0 = none. */
    augmentShift: z.number().int().min(0).max(1000).default(0),
  })
  .strict();

/** How each run is analysed (analyze: bounds beside true values per block and for the network). */
const AnalyzeSettings = z
  .object({
    /** Test inputs analysed (at least 100 for a study whose medians are to be trusted). */
    n: positiveInt.max(2000).default(100),
    /** Power-iteration limit of the block true values. */
    iterations: positiveInt.max(10000).default(50),
  })
  .strict();

const EpsList = z.array(z.number().min(0).finite()).min(1);

/** How each run is attacked: every attack at every eps of each norm, on the same test inputs. */
const AttackSettings = z
  .object({
    /** Test inputs attacked (at least 500 for robust accuracies to within a few points). */
    n: positiveInt.max(100000).default(500),
    attacks: z.array(z.string()).min(1).default(["apgd"]),
    /** Radii per norm (input units: pixels in [0, 1], or embedding units); null = that norm's defaults for the data's kind. */
    linf: EpsList.nullable().default(null),
    l2: EpsList.nullable().default(null),
    steps: positiveInt.max(10000).default(20),
    restarts: positiveInt.max(100).default(1),
    batch: positiveInt.max(4096).default(50),
  })
  .strict();

/** The grid file's schema (also what `--config FILE` holds); defaults fill what is left out. */
export const StudyGridSchema = z
  .object({
    data: z.array(z.string().min(1)).min(1).default(["mnist"]),
    model: z.array(z.string().min(1)).min(1).default(["vit-tiny"]),
    lambdas: z
      .array(z.number().min(0, "must be >= 0").max(JASMIN_MAX_LAMBDA, `must be at most ${JASMIN_MAX_LAMBDA} (beyond it the penalty drowns the cross-entropy in float32)`))
      .min(1)
      .default([0, 0.1]),
    seeds: z.array(z.number().int("must be an integer").min(0, "must be >= 0").max(2 ** 31 - 1, "must be below 2^31")).min(1).default([0, 1, 2]),
    jasminNorm: z.array(z.enum(JASMIN_NORMS as [JasminNorm, ...JasminNorm[]])).min(1).default(["top2"]),
    reduce: z.array(z.enum(JASMIN_REDUCTIONS as [JasminReduce, ...JasminReduce[]])).min(1).default(["max-log"]),
    train: TrainSettings.default(TrainSettings.parse({})),
    analyze: AnalyzeSettings.default(AnalyzeSettings.parse({})),
    attack: AttackSettings.default(AttackSettings.parse({})),
  })
  .strict();

/** The file in a study folder that holds the grid it was started with. */
export const GRID_FILE = "study-grid.json";

/**
 * The grid a study folder was started with (DIR/study-grid.json), or null when it has none.
 *
 * @throws InputError when the file is not valid JSON or not a valid grid.
 * @example readGridFile("runs/study")?.lambdas // [0, 0.1]
 */
export function readGridFile(dir: string): StudyGrid | null {
  const path = join(dir, GRID_FILE);
  if (!existsSync(path)) return null;
  return parseStudyGrid(readJsonFile(path, "study: "), `study: ${path}`);
}

/** A study's grid with every default filled in. */
export type StudyGrid = z.output<typeof StudyGridSchema>;

/** One run of the grid: its place on every axis and its folder name. */
export interface StudyRun {
  /** Folder name under STUDY/runs/, unique in the grid, e.g. "mnist_vit-tiny_lambda0.1_top2_max-log_seed0". */
  id: string;
  /** Position in the grid's order (data, model, norm, reduce, lambda, seed; the last varies fastest). */
  index: number;
  data: string;
  model: string;
  lambda: number;
  jasminNorm: JasminNorm;
  reduce: JasminReduce;
  seed: number;
}

/** The command-line flag of each grid field, for messages (the config file uses the field names). */
export const GRID_FLAGS: Record<string, string> = {
  data: "--data",
  model: "--model",
  lambdas: "--lambdas",
  seeds: "--seeds",
  jasminNorm: "--jasmin-norm",
  reduce: "--jasmin-reduce",
  "train.epochs": "--epochs",
  "train.trainSize": "--train-size",
  "train.testLimit": "--test-limit",
  "train.batch": "--batch",
  "train.lr": "--lr",
  "train.pretrainEpochs": "--pretrain-epochs",
  "train.pretrainLr": "--pretrain-lr",
  "train.augmentShift": "--augment-shift",
  "analyze.n": "--analyze-n",
  "analyze.iterations": "--iterations",
  "attack.n": "--attack-n",
  "attack.attacks": "--attack",
  "attack.linf": "--eps-linf",
  "attack.l2": "--eps-l2",
  "attack.steps": "--steps",
  "attack.restarts": "--restarts",
};

/** "lambdas (--lambdas)" for a field path, or the path alone when it has no flag. */
function named(path: readonly PropertyKey[]): string {
  const field = path.filter((p) => typeof p === "string").join(".");
  const flag = GRID_FLAGS[field];
  const at = path.length > 0 ? path.join(".") : "(root)";
  return flag === undefined ? at : `${at} (${flag})`;
}

/**
 * Validates a grid (a parsed `--config` file, the flags' object, or both merged), fills in the
 * defaults and checks what the schema cannot: every attack is registered, no axis and no
 * radius list repeats a value. Lambdas and seeds are sorted (their order does not change the
 * runs).
 *
 * @throws InputError naming `where`, the field and its flag, e.g. `study: lambdas.1 (--lambdas): ...`.
 * @example parseStudyGrid({ lambdas: [0.1, 0], seeds: [0, 1] }, "study").lambdas // [0, 0.1]
 */
export function parseStudyGrid(value: unknown, where: string): StudyGrid {
  const result = StudyGridSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new InputError(`${where}: ${named(issue.path)}: ${issueReason(issue, value)}`);
  }
  const grid = result.data;
  const known = attackNames();
  for (const a of grid.attack.attacks)
    if (!known.includes(a)) throw new InputError(`${where}: attack.attacks (--attack): unknown attack "${a}" (expected one of ${known.join(", ")})`);
  const lists: [string, readonly unknown[] | null][] = [
    ...(["data", "model", "lambdas", "seeds", "jasminNorm", "reduce"] as const).map((a): [string, readonly unknown[]] => [a, grid[a]]),
    ["attack.linf", grid.attack.linf],
    ["attack.l2", grid.attack.l2],
    ["attack.attacks", grid.attack.attacks],
  ];
  for (const [field, values] of lists) {
    const repeated = values?.find((v, i) => values.indexOf(v) !== i);
    if (repeated !== undefined) throw new InputError(`${where}: ${named(field.split("."))}: ${JSON.stringify(repeated)} is listed twice`);
  }
  return { ...grid, lambdas: [...grid.lambdas].sort((a, b) => a - b), seeds: [...grid.seeds].sort((a, b) => a - b) };
}

/**
 * A grid input with another laid over it: top-level fields replaced, and the settings objects
 * (train, analyze, attack) merged field by field.
 *
 * @example mergeGridInput({ attack: { n: 500, steps: 20 } }, { attack: { steps: 10 } }) // { attack: { n: 500, steps: 10 } }
 */
export function mergeGridInput(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = base[k];
    merged[k] =
      typeof v === "object" && v !== null && !Array.isArray(v) && typeof b === "object" && b !== null && !Array.isArray(b) ? { ...b, ...v } : v;
  }
  return merged;
}

/**
 * The first setting where two grids differ, as "attack.steps (--steps): 20 there, 10 here";
 * an axis is compared as a set (its order does not change the runs); null when they agree.
 *
 * @example gridDifference(a, { ...a, attack: { ...a.attack, steps: 10 } }) // "attack.steps (--steps): 20 there, 10 here"
 */
export function gridDifference(there: StudyGrid, here: StudyGrid): string | null {
  const axes = new Set(["data", "model", "lambdas", "seeds", "jasminNorm", "reduce"]);
  const walk = (a: unknown, b: unknown, path: string[]): string | null => {
    if (typeof a === "object" && a !== null && !Array.isArray(a) && typeof b === "object" && b !== null && !Array.isArray(b)) {
      for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
        const d = walk((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], [...path, k]);
        if (d !== null) return d;
      }
      return null;
    }
    const norm = (v: unknown) => (Array.isArray(v) && axes.has(path.join(".")) ? JSON.stringify([...v].map(String).sort()) : JSON.stringify(v));
    if (norm(a) === norm(b)) return null;
    return `${named(path)}: ${JSON.stringify(a)} there, ${JSON.stringify(b)} here`;
  };
  return walk(there, here, []);
}

/** A data spec or model name as a folder-name part: letters, digits, '.', '-' kept; the rest '-'. */
export const part = (s: string) => s.replace(/[^A-Za-z0-9.-]+/g, "-").replace(/^-+|-+$/g, "") || "x";

/**
 * Every run of the grid, in grid order (data, model, norm, reduce, lambda, seed; the seed
 * varies fastest), with unique folder names.
 *
 * @throws InputError when two runs would share a folder name (two data specs or models that
 *   differ only in characters a folder name cannot hold).
 * @example expandGrid(parseStudyGrid({ lambdas: [0, 1], seeds: [0, 1] }, "t")).map((r) => r.id)
 *   // ["mnist_vit-tiny_lambda0_top2_max-log_seed0", "..._seed1", "..._lambda1_..._seed0", "..._lambda1_..._seed1"]
 */
export function expandGrid(grid: StudyGrid): StudyRun[] {
  const runs: StudyRun[] = [];
  for (const data of grid.data)
    for (const model of grid.model)
      for (const jasminNorm of grid.jasminNorm)
        for (const reduce of grid.reduce)
          for (const lambda of grid.lambdas)
            for (const seed of grid.seeds) {
              const id = [part(data), part(model), `lambda${lambda}`, jasminNorm, reduce, `seed${seed}`].join("_");
              runs.push({ id, index: runs.length, data, model, lambda, jasminNorm, reduce, seed });
            }
  const ids = new Set<string>();
  for (const r of runs) {
    if (ids.has(r.id))
      throw new InputError(`study: two runs of the grid would share the folder ${r.id}: give data specs and models that differ in letters or digits`);
    ids.add(r.id);
  }
  return runs;
}

/**
 * The runs of shard k of n: every n-th run starting with the k-th (1-based), so that n
 * processes (a batch scheduler's job array sharing the study folder) cover the grid exactly
 * once between them.
 *
 * @throws InputError when k is not from 1 to n.
 * @example shardRuns([a, b, c, d, e], 2, 2) // [b, d]
 */
export function shardRuns<T>(runs: readonly T[], k: number, n: number): T[] {
  if (!Number.isSafeInteger(n) || n < 1 || !Number.isSafeInteger(k) || k < 1 || k > n)
    throw new InputError(`study: --shard: must be k/n with 1 <= k <= n, got ${k}/${n}`);
  return runs.filter((_, i) => i % n === k - 1);
}

/**
 * Parses `--shard k/n`.
 *
 * @throws InputError on anything but two positive integers with k <= n.
 * @example parseShard("3/8") // { k: 3, n: 8 }
 */
export function parseShard(text: string): { k: number; n: number } {
  const m = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(text);
  const k = m === null ? NaN : Number(m[1]);
  const n = m === null ? NaN : Number(m[2]);
  if (!(k >= 1 && n >= 1 && k <= n && Number.isSafeInteger(k) && Number.isSafeInteger(n)))
    throw new InputError(`study: --shard: must be k/n with 1 <= k <= n (e.g. 1/4 for the first of 4 jobs), got "${text}"`);
  return { k, n };
}
