import { existsSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { readJsonFile, validated } from "./jsonFile.ts";
import { part, type StudyGrid, type StudyRun } from "./grid.ts";

/**
 * A study's pretraining (grid field train.pretrainEpochs): one model per data, model and seed,
 * trained without JaSMin into STUDY/pretrain/ID/, which every run of that seed fine-tunes with
 * its own lambda (train --init). Runs of one seed then start from the same weights, so their
 * paired differences measure JaSMin's fine-tuning alone, and the long training to a high clean
 * accuracy is paid once per seed instead of once per lambda.
 */

/** The folder of a study that holds the pretrained models. */
export const PRETRAIN_FOLDER = "pretrain";

/** The file that marks a pretrained model finished (written last, atomically; absent = not ready). */
export const PRETRAINED_FILE = "pretrained.json";

/** One model to pretrain. */
export interface PretrainBase {
  /** Folder name under STUDY/pretrain/, e.g. "mnist_vit-tiny_seed0". */
  id: string;
  data: string;
  model: string;
  seed: number;
}

/** What pretrained.json holds. */
export const PretrainedSchema = z.strictObject({
  format: z.literal("attnlip-study-pretrained"),
  version: z.literal(1),
  epochs: z.number().int().min(1),
  /** Clean accuracy on the held-out test split after pretraining, in [0, 1] (null: not measured). */
  testAccuracy: z.number().min(0).max(1).nullable(),
  /** Training wall time, seconds. */
  seconds: z.number().min(0),
});

/** The content of pretrained.json. */
export type Pretrained = z.output<typeof PretrainedSchema>;

/**
 * The pretrained model a run fine-tunes: its folder name ("DATA_MODEL_seedS", with the same
 * folder-name parts as the run's own id).
 *
 * @example pretrainIdOf({ id: "mnist_vit-tiny_lambda0.1_top2_max-log_seed2", seed: 2, ... }) // "mnist_vit-tiny_seed2"
 */
export function pretrainIdOf(run: StudyRun): string {
  return `${part(run.data)}_${part(run.model)}_seed${run.seed}`;
}

/**
 * The models a grid pretrains, each once, in the order of the first run that needs it; none
 * when the grid does not pretrain.
 *
 * @example pretrainBases(grid, expandGrid(grid)).map((b) => b.id) // ["mnist_vit-tiny_seed0", "mnist_vit-tiny_seed1"]
 */
export function pretrainBases(grid: StudyGrid, runs: readonly StudyRun[]): PretrainBase[] {
  if (grid.train.pretrainEpochs === null) return [];
  const bases = new Map<string, PretrainBase>();
  for (const run of runs) {
    const id = pretrainIdOf(run);
    if (!bases.has(id)) bases.set(id, { id, data: run.data, model: run.model, seed: run.seed });
  }
  return [...bases.values()];
}

/**
 * A pretrained model's pretrained.json, or null when it is not finished.
 *
 * @throws InputError when the file is there but not valid.
 * @example readPretrained("study/pretrain/mnist_vit-tiny_seed0")?.testAccuracy // 0.971
 */
export function readPretrained(dir: string): Pretrained | null {
  const path = join(dir, PRETRAINED_FILE);
  if (!existsSync(path)) return null;
  return validated(PretrainedSchema, readJsonFile(path, "study: "), `study: ${path}`);
}
