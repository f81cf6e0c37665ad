import { existsSync, readdirSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { useBackend, type BackendName } from "../backend.ts";
import { writeFileAtomically, writeJsonAtomically } from "../io/atomicWrite.ts";
import { checkOutPath } from "../io/outPath.ts";
import { InputError } from "../util/errors.ts";
import { aggregateStudy, RUNS_FOLDER, studyCsv, type StudySummary } from "../study/aggregate.ts";
import {
  expandGrid,
  GRID_FILE,
  gridDifference,
  mergeGridInput,
  parseStudyGrid,
  readGridFile,
  shardRuns,
  type StudyGrid,
  type StudyRun,
} from "../study/grid.ts";
import { preflightGrid } from "../study/preflight.ts";
import { readRunResult } from "../study/result.ts";
import {
  PRETRAIN_FOLDER,
  pretrainBases,
  pretrainIdOf,
  readPretrained,
  type PretrainBase,
} from "../study/pretrain.ts";
import { runPretrain, runStudyRun, type StudyRunOptions } from "./studyRunOne.ts";

/** How often a shard looks whether another shard has finished a pretrained model it waits for. */
const PRETRAIN_POLL_MS = 5000;

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** Options of {@link runStudy}. */
export interface StudyOptions {
  /** The study folder: study-grid.json, runs/ID/ per run, study.json and study.csv. */
  out: string;
  /**
   * The grid as given (a --config file's object and the flags laid over it, defaults not yet
   * filled in; `{}` = the default grid); undefined = the one saved in OUT (continuing a study;
   * refused for a folder without one). Continuing a folder, the given fields must agree with
   * its saved grid.
   */
  grid?: Record<string, unknown>;
  /** How the grid was given, for messages ["study"]. */
  where?: string;
  /** Run only shard k of n (every n-th run from the k-th; 1-based). */
  shard?: { k: number; n: number };
  backend: BackendName;
  /** Worker threads of each run's training, analysis and attacks [1]. */
  workers?: number;
  /** Where progress lines go [console.error]. */
  progress?: (line: string) => void;
  /** Where the stages' own lines go (training's epoch lines) [console.log]. */
  log?: (line: string) => void;
  /** How often a shard looks whether a pretrained model it waits for is finished, ms [5000]. */
  pollMs?: number;
}

/**
 * A new study goes into a new or empty folder: one that holds other things (a checkpoint, a
 * report, a run of another command) is refused, so that `attnlip study DIR` on the wrong
 * folder neither starts a default grid inside it nor mixes files. An empty runs/ folder is what
 * a study killed before it saved its grid leaves: it counts as empty.
 *
 * @throws InputError naming the folder.
 */
function refuseOtherFolder(out: string): void {
  if (!existsSync(out)) return;
  const entries = readdirSync(out);
  const emptyRuns = (e: string) => e === RUNS_FOLDER && readdirSync(join(out, e)).length === 0;
  if (entries.every(emptyRuns)) return;
  throw new InputError(
    `study: ${out} is not empty and holds no study (no ${GRID_FILE}): give a new or empty folder for a new study`,
  );
}

/**
 * Runs a study: every run of the grid (or of one shard of it) trained, analysed and attacked
 * into OUT/runs/ID/ ({@link runStudyRun}), one after the other, each stage with `workers`
 * threads; then aggregates every finished run of the folder into OUT/study.json and
 * OUT/study.csv ({@link aggregateStudy}).
 *
 * When the grid pretrains (train.pretrainEpochs), one model per data, model and seed is first
 * trained without JaSMin into OUT/pretrain/ID/ (study/pretrain.ts), and each run fine-tunes its
 * seed's model instead of training from scratch.
 *
 * Resumable: the grid is saved in OUT/study-grid.json at the start; a second call with the
 * same grid (or none) skips finished runs and continues an interrupted one where it stopped.
 * Shards of a job array share OUT: each runs only its runs (and pretrains every n-th model) and
 * aggregates what is finished; a run whose model another shard pretrains waits until it is
 * finished, while the shard's ready runs go first.
 * Progress: one line per run with the time it took and the estimated time left.
 *
 * @throws InputError when OUT holds a study with another grid (never mixed: the message names
 *   the first field that differs), when OUT holds something other than a study, when OUT
 *   cannot be written, and what the runs throw (the
 *   message names the run).
 * @example await runStudy({ out: "study", grid: parseStudyGrid({ model: ["vit-micro"], seeds: [0, 1] }, "study"), backend: "wasm" })
 */
export async function runStudy(options: StudyOptions): Promise<StudySummary> {
  checkOutPath(options.out, "folder", "OUT", "study");
  const out = resolve(options.out);
  const { grid, saved } = await studyGrid(out, options);
  const all = expandGrid(grid);
  const runs = options.shard !== undefined ? shardRuns(all, options.shard.k, options.shard.n) : all;
  await mkdir(join(out, RUNS_FOLDER), { recursive: true });
  if (!saved) await saveGrid(out, grid);
  await useBackend(options.backend);
  // Every finished run's result.json is read before the first line: a damaged one stops the study at once.
  const finished = await Promise.all(
    runs.map((run) => readRunResult(join(out, RUNS_FOLDER, run.id))),
  );
  const progress = options.progress ?? ((line: string) => console.error(line));
  const log = options.log ?? ((line: string) => console.log(line));
  const started = performance.now();
  const label = options.shard !== undefined ? ` (shard ${options.shard.k}/${options.shard.n})` : "";
  const stage = { backend: options.backend, workers: options.workers ?? 1, log };
  // Pretraining first: this shard's share of the grid's pretrained models (every n-th, as runs).
  const bases = pretrainBases(grid, all);
  const baseDir = (id: string) => join(out, PRETRAIN_FOLDER, id);
  const myBases =
    options.shard !== undefined ? shardRuns(bases, options.shard.k, options.shard.n) : bases;
  await pretrainShare(myBases, grid, baseDir, stage, (line) => progress(`study${label}: ${line}`));
  for (const [i, run] of runs.entries())
    if (finished[i] !== null)
      progress(`study${label}: run ${i + 1}/${runs.length} ${run.id}: finished earlier, skipped`);
  const pending = runs.map((run, i) => ({ run, i })).filter(({ i }) => finished[i] === null);
  await runPending(pending, {
    out,
    grid,
    total: runs.length,
    bases,
    baseDir,
    stage,
    label,
    shard: options.shard,
    pollMs: options.pollMs ?? PRETRAIN_POLL_MS,
    progress,
  });
  const summary = await aggregateStudy(out);
  await writeJsonAtomically(join(out, "study.json"), summary);
  await writeFileAtomically(join(out, "study.csv"), studyCsv(summary));
  progress(
    `study${label}: ${summary.finished} finished run(s) aggregated into ${join(out, "study.json")} and study.csv in ${formatDuration((performance.now() - started) / 1000)}` +
      (summary.unfinished.length > 0
        ? ` (${summary.unfinished.length} unfinished: not included)`
        : ""),
  );
  return summary;
}

/**
 * The grid of the study in OUT: the one saved there (the given fields, if any, must agree with
 * it), or for a new study the given one, checked by a preflight before it is saved.
 *
 * @returns the grid and whether OUT had it saved already.
 * @throws InputError when OUT holds another grid, holds something other than a study, or holds
 *   no study and no grid is given; what the preflight throws.
 */
async function studyGrid(
  out: string,
  options: StudyOptions,
): Promise<{ grid: StudyGrid; saved: boolean }> {
  let saved = readGridFile(out);
  if (saved === null)
    try {
      refuseOtherFolder(out);
    } catch (e) {
      // Shards of a job array started together: another one saved the grid meanwhile.
      saved = readGridFile(out);
      if (saved === null) throw e;
    }
  const where = options.where ?? "study";
  if (saved !== null) {
    // Only what was given is compared: the rest stays as the folder's grid has it.
    if (options.grid !== undefined) {
      const diff = gridDifference(
        saved,
        parseStudyGrid(mergeGridInput(saved, options.grid), where),
      );
      if (diff !== null)
        throw new InputError(
          `study: ${out} holds a study with another grid (${diff}); continue it without grid flags, or choose another folder`,
        );
    }
    return { grid: saved, saved: true };
  }
  // A new study needs its grid said: a study killed before it saved its grid, continued
  // without flags, must not start the default grid (hours of runs) in its place.
  if (options.grid === undefined)
    throw new InputError(
      `study: ${out} holds no study yet (no ${GRID_FILE}): give the grid to start one (flags such as --model, --lambdas, --seeds, or --config FILE)`,
    );
  const grid = parseStudyGrid(options.grid, where);
  // Before the grid is saved: a folder must not keep a grid whose runs cannot start.
  await preflightGrid(grid);
  return { grid, saved: false };
}

/**
 * Saves a new study's grid in OUT/study-grid.json.
 *
 * @throws InputError when another process saved another grid there at the same time.
 */
async function saveGrid(out: string, grid: StudyGrid): Promise<void> {
  await writeJsonAtomically(join(out, GRID_FILE), grid);
  // Two shards started together may both have found no grid and saved theirs: the last one
  // written is the study's, and a shard that finds another grid there stops before any run
  // (best effort: one that re-reads before the other writes cannot see it).
  const kept = readGridFile(out);
  const diff = kept === null ? null : gridDifference(kept, grid);
  if (diff !== null)
    throw new InputError(
      `study: ${out}: another process started the study with another grid at the same time (${diff}); give every shard the same grid`,
    );
}

/** What {@link runPending} needs of its study. */
interface PendingContext {
  out: string;
  grid: StudyGrid;
  /** Runs of this shard, for the "run i/total" lines. */
  total: number;
  bases: readonly PretrainBase[];
  baseDir: (id: string) => string;
  stage: StudyRunOptions;
  /** " (shard k/n)" or "". */
  label: string;
  shard: { k: number; n: number } | undefined;
  pollMs: number;
  progress: (line: string) => void;
}

/**
 * Runs the unfinished runs (with their index in the shard's runs) into OUT/runs/ID/, in grid
 * order, except that a run whose pretrained model another shard has not finished yet waits
 * while the next ready run goes first; a line before and after each, with the time left.
 *
 * @throws what a run throws, its message prefixed with "run ID: ".
 */
async function runPending(
  pending: { run: StudyRun; i: number }[],
  c: PendingContext,
): Promise<void> {
  const { out, grid, total, bases, baseDir, stage, label, shard, progress } = c;
  let ranSeconds = 0;
  let ran = 0;
  const waitingFor = new Set<string>();
  while (pending.length > 0) {
    const next = pending.findIndex(
      ({ run }) => bases.length === 0 || readPretrained(baseDir(pretrainIdOf(run))) !== null,
    );
    if (next < 0) {
      for (const { run } of pending) {
        const id = pretrainIdOf(run);
        if (waitingFor.has(id)) continue;
        waitingFor.add(id);
        const owner =
          shard !== undefined
            ? ` (pretrained by shard ${(bases.findIndex((b) => b.id === id) % shard.n) + 1}/${shard.n})`
            : "";
        progress(`study${label}: waiting for the pretrained model ${id}${owner}`);
      }
      await sleep(c.pollMs);
      continue;
    }
    const [{ run, i }] = pending.splice(next, 1);
    const dir = join(out, RUNS_FOLDER, run.id);
    const t0 = performance.now();
    // Only runs started from nothing time the ETA: a run resumed from its saved stages (after a
    // kill) takes a fraction of a whole one.
    const fresh = !existsSync(join(dir, "train_state.json"));
    const training =
      bases.length > 0
        ? `fine-tune ${pretrainIdOf(run)} for ${grid.train.epochs} epoch(s)`
        : `train ${grid.train.epochs} epoch(s)`;
    progress(
      `study${label}: run ${i + 1}/${total} ${run.id}: ${training}, analyze ${grid.analyze.n} inputs, attack ${grid.attack.n} inputs (l_inf and l_2)`,
    );
    try {
      await runStudyRun(run, grid, dir, {
        ...stage,
        ...(bases.length > 0 ? { pretrained: baseDir(pretrainIdOf(run)) } : {}),
      });
    } catch (e) {
      if (e instanceof Error) e.message = `run ${run.id}: ${e.message}`;
      throw e;
    }
    const seconds = (performance.now() - t0) / 1000;
    if (fresh) {
      ranSeconds += seconds;
      ran++;
    }
    const left = pending.length;
    const eta =
      left > 0 && ran > 0
        ? `; about ${formatDuration((ranSeconds / ran) * left)} left for ${left} run(s)`
        : "";
    progress(
      `study${label}: run ${i + 1}/${total} ${run.id} done in ${formatDuration(seconds)}${eta}`,
    );
  }
}

/**
 * Trains the pretrained models of `bases` that are not finished yet (study/pretrain.ts), one
 * after the other, with a line before and after each.
 *
 * @throws what training throws, its message prefixed with "pretrain ID: ".
 */
async function pretrainShare(
  bases: readonly PretrainBase[],
  grid: StudyGrid,
  baseDir: (id: string) => string,
  stage: StudyRunOptions,
  progress: (line: string) => void,
): Promise<void> {
  for (const [i, base] of bases.entries()) {
    const dir = baseDir(base.id);
    if (readPretrained(dir) !== null) continue;
    const t0 = performance.now();
    progress(
      `pretrain ${i + 1}/${bases.length} ${base.id}: train ${grid.train.pretrainEpochs} epoch(s) without JaSMin`,
    );
    let pretrained;
    try {
      pretrained = await runPretrain(base, grid, dir, stage);
    } catch (e) {
      if (e instanceof Error) e.message = `pretrain ${base.id}: ${e.message}`;
      throw e;
    }
    const accuracy =
      pretrained.testAccuracy === null
        ? ""
        : `: test accuracy ${(100 * pretrained.testAccuracy).toFixed(2)}%`;
    progress(
      `pretrain ${i + 1}/${bases.length} ${base.id} done in ${formatDuration((performance.now() - t0) / 1000)}${accuracy}`,
    );
  }
}

/**
 * Aggregates whatever runs of a study folder are finished (other shards may still run) into
 * DIR/study.json and DIR/study.csv.
 *
 * @throws InputError when DIR is not a study folder or a result.json is malformed.
 * @example const summary = await aggregateStudyFolder("study")
 */
export async function aggregateStudyFolder(dir: string): Promise<StudySummary> {
  const summary = await aggregateStudy(dir);
  await writeJsonAtomically(join(dir, "study.json"), summary);
  await writeFileAtomically(join(dir, "study.csv"), studyCsv(summary));
  return summary;
}

/**
 * Whether a folder is a study folder: attnlip study saved its grid there.
 *
 * @example isStudyFolder("runs/study") // true after attnlip study runs/study ...
 */
export function isStudyFolder(dir: string): boolean {
  return existsSync(join(dir, GRID_FILE));
}

/** Seconds as "42 s", "3.5 min" or "1.2 h". */
export function formatDuration(seconds: number): string {
  if (seconds < 90) return `${seconds.toFixed(0)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}
