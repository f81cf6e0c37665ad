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
}

/**
 * One run of a study in its own folder: trains (JaSMin with the run's lambda, norm and
 * reduction; the run's seed for the initialisation, the shuffling and the split), analyses
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
export async function runStudyRun(run: StudyRun, grid: StudyGrid, dir: string, options: StudyRunOptions): Promise<RunResult> {
  const done = await readRunResult(dir);
  if (done !== null) return done;
  const { backend, workers } = options;
  await recoverCheckpoint(dir);
  const epochs = grid.train.epochs;
  // A checkpoint with fewer epochs (killed during training) is resumed; resume checks it.
  const checkpoint = isCheckpointFolder(dir);
  if (!checkpoint || (await trainedEpochs(dir)) < epochs) {
    const trained = await trainInWorkers({
      workers,
      backend,
      ...(!checkpoint
        ? {
            data: run.data,
            model: run.model,
            batchSize: grid.train.batch,
            lr: grid.train.lr,
            jasmin: { lambda: run.lambda, norm: run.jasminNorm, reduce: run.reduce },
            seed: run.seed,
            out: dir,
            ...(grid.train.trainSize !== null ? { limit: grid.train.trainSize } : {}),
            ...(grid.train.testLimit !== null ? { testLimit: grid.train.testLimit } : {}),
          }
        : { resume: dir }),
      epochs,
      progress: "none",
      log: options.log,
    });
    trained.model.dispose();
    options.log(
      `trained ${dir}: test accuracy ${(100 * trained.finalTestAccuracy).toFixed(2)}% after ${epochs} epoch(s) (${trained.wallSeconds.toFixed(1)} s)`,
    );
  }
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

/** The epochs a checkpoint has completed (train_state.json); -1 when unreadable (resuming then says why). */
async function trainedEpochs(dir: string): Promise<number> {
  try {
    const state = JSON.parse(await readFile(join(dir, "train_state.json"), "utf8")) as { epoch?: unknown };
    return typeof state.epoch === "number" ? state.epoch : -1;
  } catch {
    return -1;
  }
}
