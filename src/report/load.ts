import { readFile, stat } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { z } from "zod";
import { DuplicateKeyError, parseJsonStrict } from "../io/strictJson.ts";
import { InputError } from "../util/errors.ts";
import { AttackFileSchema, SplitSchema, type AttackFile } from "../robustness/attackFile.ts";
import { firstIssue } from "../util/zodIssue.ts";

/**
 * Reading a run folder for the report: analysis.json (required), and whatever else is there
 * (attack.json, metrics.jsonl, config.json, train_state.json). Files are validated loosely:
 * only what the report draws is checked, so that newer files with more fields still load.
 * Every problem is an InputError naming the file.
 */

/** A number array as analysis.json writes it: NaN (not computed) is written as null. */
const NumberArray = z.array(z.number().nullable());

/** Per input: whether an estimated true value converged; null where none was computed. */
const ConvergedArray = z.array(z.boolean().nullable());

const HeadSchema = z.looseObject({
  head: z.number().optional(),
  attention: z.record(z.string(), NumberArray).optional(),
  true: NumberArray.optional(),
  converged: ConvergedArray.optional(),
});

const LayerSchema = z.looseObject({
  true: NumberArray.optional(),
  ratio: z.record(z.string(), NumberArray).optional(),
  converged: ConvergedArray.optional(),
  heads: z.array(HeadSchema).optional(),
});

const AnalysisSchema = z.looseObject({
  split: SplitSchema.optional(),
  source: z.string().optional(),
  data: z.string().optional(),
  seed: z.number().optional(),
  mlp: z.string().optional(),
  inputs: z.number().optional(),
  inputSpace: z.string().optional(),
  model: z.record(z.string(), z.unknown()).optional(),
  variants: z.array(z.string()).min(1),
  layers: z.record(z.string(), LayerSchema),
  /** How block and head true values were estimated (absent in older files). */
  convergence: z
    .looseObject({
      method: z.string().optional(),
      tolerance: z.number().optional(),
      maxIterations: z.number().optional(),
    })
    .optional(),
  attentionRows: z
    .object({
      top1: z.array(z.number()),
      top2: z.array(z.number()).optional(),
      sigma: z.array(z.number()),
      total: z.number().optional(),
    })
    .optional(),
  attentionMaps: z
    .object({ n: z.number().int().min(0), maps: z.array(z.array(z.array(z.number()))) })
    .optional(),
  /** The input the attention maps are of (analysis/firstInput.ts; absent in older files). */
  firstInput: z
    .discriminatedUnion("kind", [
      z.object({ kind: z.literal("image"), height: z.number().int().min(1), width: z.number().int().min(1), channels: z.number().int().min(1), pixels: z.array(z.number()) }),
      z.object({ kind: z.literal("text"), tokens: z.array(z.string()), real: z.number().int().min(0) }),
    ])
    .optional(),
});

/** What the report uses of analysis.json. */
export type AnalysisFile = z.output<typeof AnalysisSchema>;

/**
 * attack.json: robust accuracy (and the zero-gradient fraction) per registered attack and
 * epsilon. The schema is the writer's own (robustness/attackFile.ts); older files with one
 * column per attack (pgd, fgsm) are converted on load.
 */
export type { AttackFile };

const MetricSchema = z.looseObject({
  type: z.string().optional(),
  epoch: z.number(),
  step: z.number().optional(),
  loss: z.number().nullable().optional(),
  crossEntropy: z.number().nullable().optional(),
  jasmin: z.number().nullable().optional(),
  accuracy: z.number().nullable().optional(),
  testAccuracy: z.number().nullable().optional(),
  meanSigma: z.number().nullable().optional(),
  lr: z.number().nullable().optional(),
  time: z.number().nullable().optional(),
});

/** One record of metrics.jsonl (a training step, or an epoch summary with testAccuracy). */
export type MetricRecord = z.output<typeof MetricSchema>;

const ObjectSchema = z.record(z.string(), z.unknown());

/** Everything the report found in one run folder. Optional files are null when absent. */
export interface RunData {
  /** Display name (the folder name unless given). */
  name: string;
  /** The folder, as given. */
  dir: string;
  /** Paths of the files read, by role (analysis, attack, metrics, config, trainState). */
  files: Record<string, string | null>;
  analysis: AnalysisFile;
  attack: AttackFile | null;
  metrics: MetricRecord[] | null;
  config: Record<string, unknown> | null;
  trainState: Record<string, unknown> | null;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/** The first of the candidate paths that is a file, or null. */
async function firstFile(candidates: string[]): Promise<string | null> {
  for (const path of candidates) if (await isFile(path)) return path;
  return null;
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (e) {
    throw new InputError(`${path}: cannot read (${(e as Error).message})`);
  }
}

function parseJsonText(path: string, text: string, where = ""): unknown {
  try {
    return parseJsonStrict(text); // a key given twice is refused, not read as its last value
  } catch (e) {
    if (e instanceof DuplicateKeyError) throw new InputError(`${path}${where}: ${e.message}`);
    throw new InputError(`${path}${where}: invalid JSON (${(e as Error).message})`);
  }
}

function validate<T extends z.ZodType>(
  schema: T,
  value: unknown,
  path: string,
  where = "",
): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new InputError(`${path}${where}: ${firstIssue(result.error, value)}`);
  }
  return result.data;
}

async function readJsonFile<T extends z.ZodType>(path: string, schema: T): Promise<z.output<T>> {
  return validate(schema, parseJsonText(path, await readText(path)), path);
}

/** Checks what the schema cannot say: every variant has an array in every layer. */
function checkAnalysis(path: string, analysis: AnalysisFile): void {
  const names = Object.keys(analysis.layers);
  if (names.length === 0) throw new InputError(`${path}: layers: no layers`);
  for (const name of names) {
    const layer = analysis.layers[name] as Record<string, unknown>;
    for (const variant of analysis.variants) {
      const values = layer[variant];
      if (!Array.isArray(values) || !values.every((v) => v === null || typeof v === "number"))
        throw new InputError(`${path}: layers.${name}.${variant}: expected an array of numbers`);
    }
  }
  const maps = analysis.attentionMaps;
  if (maps !== undefined)
    maps.maps.forEach((heads, b) =>
      heads.forEach((map, h) => {
        if (map.length !== maps.n * maps.n)
          throw new InputError(
            `${path}: attentionMaps.maps.${b}.${h}: expected ${maps.n}x${maps.n} = ${maps.n * maps.n} values, got ${map.length}`,
          );
      }),
    );
  const rows = analysis.attentionRows;
  if (rows !== undefined && rows.top1.length !== rows.sigma.length)
    throw new InputError(
      `${path}: attentionRows: top1 has ${rows.top1.length} values, sigma ${rows.sigma.length}`,
    );
}

/** metrics.jsonl: one JSON object per non-empty line. */
async function readMetrics(path: string): Promise<MetricRecord[]> {
  const lines = (await readText(path)).split("\n");
  const records: MetricRecord[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    const where = ` line ${i + 1}`;
    records.push(validate(MetricSchema, parseJsonText(path, line, where), path, where));
  });
  return records;
}

/**
 * Reads a run folder: analysis.json (in the folder, or in its `analysis/` subfolder) is
 * required; attack.json (or `attack/attack.json`), metrics.jsonl, config.json and
 * train_state.json are read when present.
 *
 * @param dir the run folder.
 * @param name display name (default: the folder's name).
 * @throws InputError when the folder is missing or not a folder, analysis.json is missing, or
 *   any file present is unreadable, not valid JSON, or not shaped as expected (the message
 *   names the file and, where it can, the field or line).
 */
export async function loadRun(dir: string, name?: string): Promise<RunData> {
  let info;
  try {
    info = await stat(dir);
  } catch {
    throw new InputError(`run folder ${dir} does not exist`);
  }
  if (!info.isDirectory()) throw new InputError(`run folder ${dir} is not a folder`);
  const analysisPath = await firstFile([
    join(dir, "analysis.json"),
    join(dir, "analysis", "analysis.json"),
  ]);
  if (analysisPath === null)
    throw new InputError(
      `run folder ${dir} holds no analysis.json (write one with \`attnlip analyze ${dir}\` for a checkpoint, or \`attnlip analyze ... --out ${dir}\`)`,
    );
  const analysis = await readJsonFile(analysisPath, AnalysisSchema);
  checkAnalysis(analysisPath, analysis);

  const attackPath = await firstFile([
    join(dir, "attack.json"),
    join(dir, "attack", "attack.json"),
  ]);
  const metricsPath = await firstFile([join(dir, "metrics.jsonl")]);
  const configPath = await firstFile([join(dir, "config.json")]);
  const statePath = await firstFile([join(dir, "train_state.json")]);
  return {
    name: name ?? (basename(resolve(dir)) || dir),
    dir,
    files: {
      analysis: analysisPath,
      attack: attackPath,
      metrics: metricsPath,
      config: configPath,
      trainState: statePath,
    },
    analysis,
    attack: attackPath === null ? null : await readJsonFile(attackPath, AttackFileSchema),
    metrics: metricsPath === null ? null : await readMetrics(metricsPath),
    config: configPath === null ? null : await readJsonFile(configPath, ObjectSchema),
    trainState: statePath === null ? null : await readJsonFile(statePath, ObjectSchema),
  };
}
