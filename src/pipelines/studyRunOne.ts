import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { BackendName } from "../backend.ts";
import { runAnalyze } from "./analyzeRun.ts";
import { runAttack } from "./attackRun.ts";
import { writeJsonAtomically } from "../io/atomicWrite.ts";
import { trainInWorkers } from "../parallel/trainTask.ts";
import { isCheckpointFolder, recoverCheckpoint } from "../train/checkpoint.ts";
import type { StudyGrid, StudyRun } from "../study/grid.ts";
import {
  PRETRAINED_FILE,
  readPretrained,
  type Pretrained,
  type PretrainBase,
} from "../study/pretrain.ts";
import type { TrainOptions } from "../train/trainer.ts";
import { readRunResult, RESULT_FILE, summarizeRunFolder, type RunResult } from "../study/result.ts";

/** Where a run's attack results go, per norm. */
export const attackFile = (norm: "linf" | "l2") => `attack-${norm}.json`;

/** Options of {@link runStudyRun}. */
export interface StudyRunOptions {
  backend: BackendName;
  /** Worker threads of training, analysis and attacks [1]. */
  workers: number;
  /** Where the stages' own lines go (their tables and progress); the study prints one line per stage. */
  log: (line: string) => void;
  /** The pretrained model the run fine-tunes (STUDY/pretrain/ID), when the grid pretrains. */
  pretrained?: string;
}

/**
 * One run of a study in its own folder: trains (JaSMin with the run's lambda, norm and
 * reduction; the run's seed for the initialisation, the shuffling and the split; when the grid
 * pretrains, it fine-tunes its seed's pretrained model, `options.pretrained`, instead), analyses
 * (bounds beside true values on grid.analyze.n test inputs), attacks (every attack of the grid
 * at every eps of each norm, on grid.attack.n test inputs, one file per norm) and writes
 * result.json, the run's figures ({@link RunResult}), last.
 *
 * Each stage is skipped when its output exists, so a run killed at any point continues where
 * it stopped: training resumes from its last checkpoint (a complete epoch), an analysis or
 * attack file is written atomically (present means complete), and result.json marks the run
 * finished. A finished run is returned as it is.
 *
 * @throws what train, analyze and attack throw (InputError on bad settings or data).
 * @example await runStudyRun(expandGrid(grid)[0], grid, "study/runs/x", { backend: "wasm", workers: 1, log: console.log })
 */
export async function runStudyRun(
  run: StudyRun,
  grid: StudyGrid,
  dir: string,
  options: StudyRunOptions,
): Promise<RunResult> {
  const done = await readRunResult(dir);
  if (done !== null) return done;
  const { backend, workers } = options;
  const jasmin = { lambda: run.lambda, norm: run.jasminNorm, reduce: run.reduce };
  if (grid.train.pretrainEpochs !== null) {
    if (options.pretrained === undefined)
      throw new Error(
        `runStudyRun: the grid pretrains, but no pretrained model was given for ${run.id}`,
      );
    await trainStage(
      dir,
      { ...stepOptions(grid, grid.train.lr), init: options.pretrained, jasmin },
      grid.train.epochs,
      options,
    );
  } else
    await trainStage(
      dir,
      { ...scratchRunOptions(grid, run, grid.train.lr), jasmin },
      grid.train.epochs,
      options,
    );
  if (!existsSync(join(dir, "analysis.json")) || !existsSync(join(dir, "analysis.csv")))
    await runAnalyze({
      force: true,
      checkpoint: dir,
      model: run.model,
      seed: run.seed,
      n: grid.analyze.n,
      out: dir,
      backend,
      mlp: "local",
      headTruth: false,
      blockTruth: true,
      iterations: grid.analyze.iterations,
      print: false,
      workers,
    });
  for (const norm of ["linf", "l2"] as const) {
    const out = join(dir, attackFile(norm));
    if (existsSync(out)) continue;
    const eps = grid.attack[norm];
    await runAttack({
      force: true,
      checkpoint: dir,
      norm,
      ...(eps !== null ? { eps } : {}),
      steps: grid.attack.steps,
      restarts: grid.attack.restarts,
      stepSize: null,
      n: grid.attack.n,
      batch: grid.attack.batch,
      seed: run.seed,
      attacks: [...grid.attack.attacks],
      backend,
      workers,
      out,
    });
  }
  const result = await summarizeRunFolder(run, dir);
  await writeJsonAtomically(join(dir, RESULT_FILE), result);
  return result;
}

/**
 * A study's pretrained model ({@link PretrainBase}): trained from scratch without JaSMin for
 * the grid's train.pretrainEpochs epochs at train.pretrainLr into `dir`, then marked finished
 * by pretrained.json (written last, atomically: a run fine-tunes it only once that file is
 * there). Resumable like a run; a finished one is returned as it is.
 *
 * @throws what train throws (InputError on bad settings or data).
 * @example await runPretrain(pretrainBases(grid, expandGrid(grid))[0], grid, "study/pretrain/mnist_vit-tiny_seed0", { backend: "wasm", workers: 1, log: console.log })
 */
export async function runPretrain(
  base: PretrainBase,
  grid: StudyGrid,
  dir: string,
  options: StudyRunOptions,
): Promise<Pretrained> {
  const done = readPretrained(dir);
  if (done !== null) return done;
  const epochs = grid.train.pretrainEpochs;
  if (epochs === null)
    throw new Error("runPretrain: the grid does not pretrain (train.pretrainEpochs is null)");
  await trainStage(
    dir,
    { ...scratchRunOptions(grid, base, grid.train.pretrainLr), jasmin: { lambda: 0 } },
    epochs,
    options,
  );
  const state = await trainedState(dir);
  const pretrained: Pretrained = {
    format: "attnlip-study-pretrained",
    version: 1,
    epochs,
    testAccuracy: state?.testAccuracy ?? null,
    seconds: state?.trainSeconds ?? 0,
  };
  await writeJsonAtomically(join(dir, PRETRAINED_FILE), pretrained);
  return pretrained;
}

/** The grid's step options: batch, augmentation and the given peak learning rate. */
function stepOptions(grid: StudyGrid, lr: number): TrainOptions {
  return {
    batchSize: grid.train.batch,
    lr,
    ...(grid.train.augmentShift > 0 ? { augmentShift: grid.train.augmentShift } : {}),
  };
}

/** A run trained from scratch: its data, model and seed, the grid's limits and step settings. */
function scratchRunOptions(
  grid: StudyGrid,
  run: { data: string; model: string; seed: number },
  lr: number,
): TrainOptions {
  return {
    ...stepOptions(grid, lr),
    data: run.data,
    model: run.model,
    seed: run.seed,
    ...(grid.train.trainSize !== null ? { limit: grid.train.trainSize } : {}),
    ...(grid.train.testLimit !== null ? { testLimit: grid.train.testLimit } : {}),
  };
}

/**
 * Trains `dir` to `epochs` epochs: a new run with `fresh`'s settings when the folder has no
 * checkpoint, a resume of its checkpoint when it has fewer epochs (killed during training;
 * resume checks it), nothing when it has them all.
 */
async function trainStage(
  dir: string,
  fresh: TrainOptions,
  epochs: number,
  options: StudyRunOptions,
): Promise<void> {
  await recoverCheckpoint(dir);
  const checkpoint = isCheckpointFolder(dir);
  if (checkpoint && ((await trainedState(dir))?.epoch ?? -1) >= epochs) return;
  const trained = await trainInWorkers({
    workers: options.workers,
    backend: options.backend,
    ...(!checkpoint ? { ...fresh, out: dir } : { resume: dir }),
    epochs,
    progress: "none",
    log: options.log,
  });
  trained.model.dispose();
  options.log(
    `trained ${dir}: test accuracy ${(100 * trained.finalTestAccuracy).toFixed(2)}% after ${epochs} epoch(s) (${trained.wallSeconds.toFixed(1)} s)`,
  );
}

/**
 * A checkpoint's completed epochs, last test accuracy and training seconds (train_state.json);
 * null when unreadable (resuming then says why).
 */
async function trainedState(
  dir: string,
): Promise<{ epoch: number; testAccuracy: number | null; trainSeconds: number } | null> {
  try {
    const state = JSON.parse(await readFile(join(dir, "train_state.json"), "utf8")) as {
      epoch?: unknown;
      trainSeconds?: unknown;
      history?: { testAccuracy?: unknown }[];
    };
    if (typeof state.epoch !== "number") return null;
    const accuracy = state.history?.at(-1)?.testAccuracy;
    return {
      epoch: state.epoch,
      testAccuracy: typeof accuracy === "number" ? accuracy : null,
      trainSeconds: typeof state.trainSeconds === "number" ? state.trainSeconds : 0,
    };
  } catch {
    return null;
  }
}
