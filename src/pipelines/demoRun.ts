import { dirname, join, resolve } from "node:path";
import { useBackend, type BackendName } from "../backend.ts";
import { trainInWorkers } from "../parallel/trainTask.ts";
import { checkOutPath } from "../io/outPath.ts";
import { runAnalyze } from "./analyzeRun.ts";
import type { Analysis } from "../analysis/analyze.ts";
import { runAttack, type AttackRecord } from "./attackRun.ts";
import { ATTACK_DEFAULTS } from "../robustness/defaults.ts";
import { attackLabel, orderAttacks } from "../robustness/attacks.ts";
import { buildReport, writeReport } from "../report/index.ts";
import { writeJsonAtomically } from "../io/atomicWrite.ts";
import { renderTable, formatNumber } from "../util/table.ts";
import { mean } from "simple-statistics";
import type { DemoSettings } from "./demoSettings.ts";
import { fileURLToPath } from "node:url";
import { committedStudyLines, readCommittedStudy } from "../study/committed.ts";
import { prepareDemoOut } from "./demoOut.ts";
import { duration } from "../util/stageProgress.ts";

/** Options of {@link runDemo}. */
export interface DemoOptions {
  settings: DemoSettings;
  out: string;
  seed: number;
  backend: BackendName;
  /** JaSMin weight of the second run; defaults to settings.jasmin. */
  jasmin?: number;
  /** Worker threads of training, analysis and attacks [1]. */
  workers?: number;
  /** --force: replace the demo's outputs in `out` whatever wrote them [false]. */
  force?: boolean;
  /**
   * `out` is the demo's default folder (no --out given): an earlier demo's results there with
   * the same settings, seed and JaSMin weight are replaced, with a line saying so [false].
   */
  ownFolder?: boolean;
}

/** One trained model's figures in the demo's summary. */
export interface DemoRunSummary {
  name: string;
  jasmin: number;
  cleanAccuracy: number;
  /** attack.json's results: robust accuracy (and zero-gradient fraction) per attack and eps. */
  robustAccuracy: AttackRecord["results"];
  networkTrueMedian: number | null;
  networkBoundMedian: Record<string, number>;
  /** Per reported variant: median network bound/true (1 would be exact; bigger is looser). */
  boundOverTrue: Record<string, number | null>;
  meanSigma: number;
  meanTop1: number;
  trainSeconds: number;
  imagesPerSecond: number;
}

const REPORTED = ["paper", "t3-half", "t3-top2", "cov", "fused"] as const;
const pct = (v: number | null | undefined) =>
  v === null || v === undefined ? "-" : `${(100 * v).toFixed(1)}%`;

/**
 * The main job: on the embedded MNIST digits (or, with the text settings, the SpamAssassin
 * corpus), trains the model twice (without and with JaSMin, same seed), then for both models
 * analyses test inputs (every bound variant per layer
 * and for the network, beside the true values), runs the default attacks (FGSM and PGD,
 * ATTACK_DEFAULTS.attacks) at several epsilons, prints
 * a summary table and writes OUT/{baseline,jasmin}/ (checkpoints, metrics, analysis.json,
 * attack.json), OUT/summary.json and OUT/report.html.
 *
 * Earlier results are never replaced silently (see prepareDemoOut in demoOut.ts): when OUT
 * holds any of the demo's outputs, the run is refused before any work unless `force`, or
 * `ownFolder` and they are an earlier demo's with the same settings (then one line says they
 * are replaced). Files the demo does not write are left alone.
 *
 * @throws InputError subclasses on bad settings; InputError when OUT cannot be written (a file,
 *   or under one) or holds earlier results it may not replace (both checked before the work
 *   starts).
 */
export async function runDemo(options: DemoOptions): Promise<DemoRunSummary[]> {
  const { settings, seed, backend } = options;
  // Before any work: an --out that cannot be written is refused now, not after training.
  checkOutPath(options.out, "folder", "--out", "demo");
  const out = resolve(options.out);
  const lambda = options.jasmin ?? settings.jasmin;
  const replacing = await prepareDemoOut({
    out: options.out,
    identity: { settings, seed, jasmin: lambda },
    force: options.force ?? false,
    ownFolder: options.ownFolder ?? false,
  });
  if (replacing !== null) console.log(replacing);
  await useBackend(backend);
  const started = performance.now();
  const runs = [
    { name: "baseline", jasmin: 0 },
    { name: "jasmin", jasmin: lambda },
  ];
  const stages = runs.length * 3 + 1;
  let stage = 0;
  const step = (what: string) => console.log(`\n[${++stage}/${stages}] ${what}`);
  const summaries: DemoRunSummary[] = [];
  let classes = 0;

  for (const run of runs) {
    const done = await demoModel(join(out, run.name), run, options, step);
    summaries.push(done.summary);
    classes = done.classes;
  }

  step("writing the report");
  const committed = committedStudyFor(settings.task);
  const reportPath = join(out, "report.html");
  await writeDemoReport(reportPath, runs, lambda, settings, committed);
  const seconds = (performance.now() - started) / 1000;
  await writeJsonAtomically(join(out, "summary.json"), {
    settings,
    seed,
    backend,
    seconds,
    runs: summaries,
  });
  console.log(`\n${summaryTable(summaries)}`);
  const nearChance = nearChanceNote(summaries, classes);
  if (nearChance !== null) console.log(nearChance);
  if (committed !== null)
    console.log(`\n${committed.heading}\n${committed.lines.map((l) => `  - ${l}`).join("\n")}`);
  console.log(`demo finished in ${duration(seconds)}; report: ${reportPath}`);
  return summaries;
}

/**
 * One model of the demo in `dir`: trains it with JaSMin weight run.jasmin, analyses it (bounds
 * beside block true values) and attacks it (the default attacks at the settings' radii), each
 * stage announced by `step`.
 *
 * @returns its summary and the model's number of classes.
 * @throws what training, the analysis and the attacks throw.
 */
async function demoModel(
  dir: string,
  run: { name: string; jasmin: number },
  options: DemoOptions,
  step: (what: string) => void,
): Promise<{ summary: DemoRunSummary; classes: number }> {
  const { settings, seed, backend } = options;
  step(
    `training ${run.name} (JaSMin lambda ${run.jasmin}) on ${settings.trainSize} examples of ${settings.data}, ${settings.epochs} epoch(s)`,
  );
  const trained = await trainInWorkers({
    workers: options.workers ?? 1,
    backend,
    data: settings.data,
    model: settings.model as never,
    epochs: settings.epochs,
    batchSize: settings.batch,
    lr: settings.lr,
    jasmin: { lambda: run.jasmin },
    seed,
    out: dir,
    limit: settings.trainSize,
  });
  trained.model.dispose();

  step(
    `analysing ${run.name}: local Lipschitz bounds against true values on ${settings.analyzeN} test examples`,
  );
  const analysis = await runAnalyze({
    force: true,
    checkpoint: dir,
    model: "vit-tiny",
    seed,
    data: settings.data,
    n: settings.analyzeN,
    out: dir,
    backend,
    mlp: "local",
    headTruth: false,
    blockTruth: true,
    iterations: settings.iterations,
    print: false,
    workers: options.workers ?? 1,
  });

  step(
    `attacking ${run.name}: ${ATTACK_DEFAULTS.attacks.map(attackLabel).join(" and ")} (${settings.norm}) at eps ${settings.eps.join(", ")} on ${settings.attackN} test examples`,
  );
  const attack = await runAttack({
    // The demo's own folders: a rerun replaces its earlier results (README says so).
    force: true,
    checkpoint: dir,
    model: "vit-tiny",
    randomInit: false,
    data: settings.data,
    norm: settings.norm,
    eps: settings.eps,
    steps: settings.steps,
    stepSize: null,
    n: settings.attackN,
    batch: 50,
    seed,
    attacks: [...ATTACK_DEFAULTS.attacks],
    backend,
    workers: options.workers ?? 1,
    out: join(dir, "attack.json"),
  });
  return {
    summary: summarizeRun(run.name, run.jasmin, analysis, attack, trained),
    classes: (attack.model as { classes: number }).classes,
  };
}

/**
 * Writes the demo's report.html over its runs' folders (beside `reportPath`): titled by the
 * task and model, with the committed study's lines as a note when one is committed.
 */
async function writeDemoReport(
  reportPath: string,
  runs: { name: string }[],
  lambda: number,
  settings: DemoSettings,
  committed: { heading: string; lines: string[] } | null,
): Promise<void> {
  const out = dirname(reportPath);
  const html = await buildReport(
    runs.map((r) => ({
      dir: join(out, r.name),
      name: r.name === "jasmin" ? `JaSMin (lambda ${lambda})` : "baseline",
    })),
    {
      title:
        settings.task === "text"
          ? "attnlip demo: a text transformer on the SpamAssassin corpus, without and with JaSMin"
          : `attnlip demo: ${typeof settings.model === "string" ? settings.model : "a tiny ViT"} on MNIST, without and with JaSMin`,
      ...(committed !== null
        ? { note: { heading: committed.heading, lines: committed.lines } }
        : {}),
    },
  );
  await writeReport(reportPath, html);
}

/** The committed studies (docs/results/), by the demo task they speak for. */
const COMMITTED_STUDIES = { text: "study-spam.json", image: "study-mnist.json" } as const;

/**
 * What the demo says about the committed study beside its own single-seed numbers: the study
 * of its own task when one is committed (study-mnist.json in docs/results/ for images,
 * study-spam.json for text), else the other task's, said to be another task; null when none is
 * committed.
 *
 * @example committedStudyFor("text")?.lines[1] // "JaSMin lowers the true network Lipschitz constant: ..."
 */
export function committedStudyFor(
  task: "image" | "text",
  folder = new URL("../../docs/results/", import.meta.url),
): { heading: string; lines: string[] } | null {
  const own = readCommittedStudy(fileURLToPath(new URL(COMMITTED_STUDIES[task], folder)));
  const other =
    own === null
      ? readCommittedStudy(
          fileURLToPath(new URL(COMMITTED_STUDIES[task === "text" ? "image" : "text"], folder)),
        )
      : null;
  const study = own ?? other;
  if (study === null) return null;
  const which =
    "several seeds; this demo's own table is one seed, where a difference can be seed-to-seed noise";
  return {
    heading:
      own !== null
        ? `What the committed study says (${which}):`
        : `No study is committed for this task yet. What the committed study on the other task says (${which}):`,
    lines: committedStudyLines(study),
  };
}

/**
 * A note when a run's clean accuracy is within a quarter of the way from chance (1 / classes) to
 * 100% (10 classes: below 32.5%; 2 classes: below 62.5%): such a model (the quick demo's,
 * trained for seconds) shows how the pipeline runs, not what JaSMin does.
 *
 * @example nearChanceNote([{ name: "baseline", cleanAccuracy: 0.2 } as DemoRunSummary], 10)
 *   // "note: clean accuracy 20.0% (baseline) is near chance (10.0% for 10 classes): ..."
 */
export function nearChanceNote(runs: readonly DemoRunSummary[], classes: number): string | null {
  if (!(classes >= 2)) return null;
  const chance = 1 / classes;
  const low = runs.filter((r) => r.cleanAccuracy < chance + (1 - chance) / 4);
  if (low.length === 0) return null;
  const which = low.map((r) => `${(100 * r.cleanAccuracy).toFixed(1)}% (${r.name})`).join(", ");
  return (
    `note: clean accuracy ${which} is near chance (${(100 * chance).toFixed(1)}% for ${classes} classes): ` +
    "these models trained too briefly to say anything about JaSMin; they show how the pipeline runs (the full demo, without --quick, trains for that)"
  );
}

function summarizeRun(
  name: string,
  jasmin: number,
  analysis: Analysis,
  attack: AttackRecord,
  trained: { imagesPerSecond: number; trainSeconds: number },
): DemoRunSummary {
  const net = analysis.summary.network;
  const rows = analysis.attentionRows;
  return {
    name,
    jasmin,
    cleanAccuracy: attack.cleanAccuracy,
    robustAccuracy: attack.results,
    networkTrueMedian: net.true?.median ?? null,
    networkBoundMedian: Object.fromEntries(REPORTED.map((v) => [v, net.bounds[v].median])),
    boundOverTrue: Object.fromEntries(REPORTED.map((v) => [v, net.ratios?.[v].median ?? null])),
    meanSigma: rows.sigma.length > 0 ? mean(rows.sigma) : NaN,
    meanTop1: rows.top1.length > 0 ? mean(rows.top1) : NaN,
    trainSeconds: trained.trainSeconds,
    imagesPerSecond: trained.imagesPerSecond,
  };
}

/**
 * The demo's printed summary: one column per run; robust accuracy per attack (registry order)
 * and eps.
 *
 * @example console.log(summaryTable(await runDemo({ settings: QUICK_DEMO, out: "demo", seed: 0, backend: "wasm" })))
 */
export function summaryTable(runs: DemoRunSummary[]): string {
  const rows: (string | number)[][] = [];
  rows.push(["JaSMin lambda", ...runs.map((r) => r.jasmin)]);
  rows.push(["clean accuracy (attacked examples)", ...runs.map((r) => pct(r.cleanAccuracy))]);
  const eps = runs[0].robustAccuracy.map((r) => r.eps).filter((e) => e > 0);
  const attacks = orderAttacks(
    runs.flatMap((r) => r.robustAccuracy.flatMap((x) => Object.keys(x.robust))),
  );
  for (const a of attacks)
    for (const e of eps)
      rows.push([
        `${attackLabel(a)} robust accuracy, eps ${e}`,
        ...runs.map((r) => pct(r.robustAccuracy.find((x) => x.eps === e)?.robust[a])),
      ]);
  rows.push([
    "median network Lipschitz, true",
    ...runs.map((r) => formatNumber(r.networkTrueMedian)),
  ]);
  for (const v of REPORTED)
    rows.push([
      `median network bound, ${v}`,
      ...runs.map((r) => formatNumber(r.networkBoundMedian[v])),
    ]);
  for (const v of REPORTED)
    rows.push([
      `median network bound/true, ${v}`,
      ...runs.map((r) => formatNumber(r.boundOverTrue[v])),
    ]);
  rows.push(["mean sigma of attention rows", ...runs.map((r) => formatNumber(r.meanSigma))]);
  rows.push(["mean p_(1) of attention rows", ...runs.map((r) => formatNumber(r.meanTop1))]);
  rows.push(["training examples/s", ...runs.map((r) => formatNumber(r.imagesPerSecond, 3))]);
  return renderTable(["", ...runs.map((r) => r.name)], rows);
}
