import { writeFileAtomically } from "../io/atomicWrite.ts";
import { InputError } from "../util/errors.ts";
import {
  attentionMapsSpec,
  inputImageSpec,
  distributionsSpec,
  RUN_COLOURS,
  sigmaScatterSpec,
  trainingSpec,
  type RunRows,
} from "./charts.ts";
import { trainingCurves, type EpochPoint, type StepPoint } from "./data.ts";
import { boundsSection } from "./boundsSection.ts";
import { certifySection } from "./certifySection.ts";
import { missingNote, splitCell } from "./cells.ts";
import { attackDifferences, robustSection } from "./robustSection.ts";
import {
  escapeHtml,
  figure,
  formatNumber,
  formatPercent,
  notAvailable,
  page,
  section,
  table,
  warning,
  type Cell,
} from "./html.ts";
import { findingsOf, type Findings } from "./findings.ts";
import { loadRun, type RunData } from "./load.ts";
import { renderVegaLite } from "./render.ts";

export { attackDifferences } from "./robustSection.ts";

/** A run to report on: its folder and, optionally, the name shown for it. */
export interface ReportRun {
  dir: string;
  name?: string;
}

/** Options of {@link buildReport}. */
export interface ReportOptions {
  /** Page title and headline (default "attnlip report: A vs B"). */
  title?: string;
  /** Largest attention map side drawn cell by cell; longer maps are average-pooled (default 64). */
  maxMapSize?: number;
  /**
   * Put two runs' attacks on one chart even when their settings differ (norm, radii, attacks,
   * inputs, steps); the report then lists the differences. Default false: refused.
   */
  allowMixed?: boolean;
  /**
   * Another experiment's note, e.g. the demo's pointer to a committed study's verdict beside
   * its own single-seed runs: a heading and its lines (plain text), shown in a section of its
   * own after the runs' sections (the top box says what these runs found).
   */
  note?: { heading: string; lines: string[] };
  /** Gets the one-line warnings the report also shows at its top (e.g. runs trained differently). */
  onWarning?: (line: string) => void;
}

const HOW_TO_READ = `Each bound is an upper bound on the <em>local Lipschitz constant</em> ‖Df(X)‖₂ at an input X:
how much a block's output, or the network's logits, can change per unit change of the input. Beside
the bounds is the <em>true value</em>, measured exactly for the whole network and estimated from below
(Lanczos, a Krylov power iteration) for each block; an estimate that did not converge is flagged. A bound is <em>tighter</em> when it is closer to the true value, that is
when its bound/true is closer to 1 (bigger is looser). The prior-art variants use the worst-case constants 1 and
1/2 for the softmax; the distribution-aware variants (arXiv:2507.07814) use sigma, the spectral norm of
each attention row's softmax Jacobian, which is small for peaked and for flat rows and reaches 1/2
only for rows that split their mass evenly between two tokens. <em>JaSMin</em> is a training
regularizer that penalises large sigma: a JaSMin run should show its attention rows lower in the
sigma plot and smaller distribution-aware bounds; whether its true Lipschitz constant and its robust
accuracy improve too, and at what cost in clean accuracy, is what the tables and the robustness chart
measure.`;

/** Distinct display names: the given one, else the folder name (its parent's for an `analysis` folder). */
function displayNames(runs: ReportRun[]): string[] {
  const names = runs.map((r) => {
    if (r.name !== undefined) return r.name;
    const parts = r.dir.replace(/[\\/]+$/, "").split(/[\\/]/);
    const last = parts.at(-1) ?? r.dir;
    return (last === "analysis" || last === "attack") && parts.length > 1
      ? parts.at(-2)!
      : last || r.dir;
  });
  return names.map((n, i) => (names.indexOf(n) < i ? `${n} (${i + 1})` : n));
}

function swatch(i: number): string {
  return `<span class="swatch" style="background:${RUN_COLOURS[i]}"></span>`;
}

function rowsOf(run: RunData): RunRows | null {
  const r = run.analysis.attentionRows;
  return r === undefined || r.top1.length === 0
    ? null
    : { run: run.name, top1: r.top1, sigma: r.sigma };
}


async function sigmaSection(runs: RunData[]): Promise<string> {
  const rows = runs.map(rowsOf);
  const present = rows.filter((r): r is RunRows => r !== null);
  const lacking = runs.filter((_, i) => rows[i] === null);
  const note = missingNote(runs, lacking, "no attention rows in analysis.json");
  if (present.length === 0) return section("sigma", "Attention rows: sigma against p(1)", note);
  const counts = runs
    .map((r) =>
      r.analysis.attentionRows
        ? `${r.name}: ${r.analysis.attentionRows.top1.length} of ${r.analysis.attentionRows.total ?? "?"} rows`
        : null,
    )
    .filter((s) => s !== null)
    .join("; ");
  const scatter = figure(
    "sigma-scatter",
    await renderVegaLite(sigmaScatterSpec(present), "sigma-scatter"),
    `Each point is one attention row (every block, head and input; ${counts}; at most 1500 drawn per run). ` +
      "Solid curve: the largest sigma any row with that top probability can have (p(1) up to 1/2, 2 p(1)(1 - p(1)) above); " +
      "dashed: the lower bound p(1)(1 - p(1)). Lower points mean smaller Jacobian norms and tighter distribution-aware bounds.",
  );
  const dist = figure(
    "distributions",
    await renderVegaLite(distributionsSpec(present), "distributions"),
    "Distributions of p(1) and of sigma over the sampled attention rows, as fractions of each run's rows (40 bins).",
  );
  return (
    section("sigma", "Attention rows: sigma against p(1)", note + scatter) +
    "\n" +
    section("distributions", "Distributions of p(1) and sigma", note + dist)
  );
}


async function mapsSection(runs: RunData[], maxMapSize: number): Promise<string> {
  const parts: string[] = [];
  for (const run of runs) {
    const m = run.analysis.attentionMaps;
    const title = runs.length > 1 ? `<h3>${escapeHtml(run.name)}</h3>` : "";
    if (
      m === undefined ||
      m.n === 0 ||
      m.maps.length === 0 ||
      m.maps.every((h) => h.length === 0)
    ) {
      parts.push(
        title +
          notAvailable(
            `${runs.length > 1 ? run.name + ": " : ""}no attention maps in analysis.json`,
          ),
      );
      continue;
    }
    const pooled =
      m.n > maxMapSize
        ? ` Maps are average-pooled to at most ${maxMapSize} x ${maxMapSize} cells.`
        : "";
    const input = run.analysis.firstInput;
    let shown = "";
    if (
      input?.kind === "image" &&
      input.pixels.length === input.height * input.width * input.channels
    ) {
      const side = Math.round(Math.sqrt(m.n - 1));
      const patches =
        side * side === m.n - 1
          ? ` Position 0 is the class token; positions 1 to ${m.n - 1} are the ${side} x ${side} patches of this image in reading order (row by row).`
          : "";
      shown = figure(
        `attention-input-${runs.indexOf(run)}`,
        await renderVegaLite(
          inputImageSpec(input.pixels, input.height, input.width, input.channels),
          `input-${runs.indexOf(run)}`,
        ),
        `${run.name}: the input these maps are of (${input.height} x ${input.width}${input.channels > 1 ? `, ${input.channels} channels averaged` : ""}).${patches}`,
      );
    } else if (input?.kind === "text") {
      const listed = input.tokens.slice(0, Math.min(input.real, 96));
      shown =
        `<p class="tokens"><strong>The input these maps are of</strong> (${input.real} real token${input.real === 1 ? "" : "s"}${input.tokens.length > input.real ? `, then ${input.tokens.length - input.real} padding positions` : ""}), position: token: ` +
        listed.map((t, i) => `<code>${i}:${escapeHtml(t)}</code>`).join(" ") +
        (input.real > listed.length ? " …" : "") +
        "</p>";
    }
    parts.push(
      title +
        shown +
        figure(
          `attention-maps-${runs.indexOf(run)}`,
          await renderVegaLite(
            attentionMapsSpec(m.maps, m.n, maxMapSize),
            `maps-${runs.indexOf(run)}`,
          ),
          `${run.name}: attention probabilities of the first input, one map per block (rows) and head (columns); ` +
            `query on the vertical axis (top first), key on the horizontal, ${m.n} positions; square-root colour scale.${pooled}`,
        ),
    );
  }
  return section("attention-maps", "Attention maps of one input", parts.join("\n"));
}

async function trainingSection(runs: RunData[]): Promise<string> {
  const curves = runs.map(trainingCurves);
  const lacking = runs.filter((_, i) => curves[i] === null);
  const note = missingNote(runs, lacking, "no metrics.jsonl (and no train_state.json history)");
  const epochs: EpochPoint[] = curves.flatMap((c) => c?.epochs ?? []);
  const steps: StepPoint[] = curves.flatMap((c) => c?.steps ?? []);
  const drawable =
    epochs.some((e) => e.testAccuracy !== null || e.meanSigma !== null) || steps.length > 0;
  if (!drawable)
    return section("training", "Training curves", note || notAvailable("no training records"));
  const chart = figure(
    "training",
    await renderVegaLite(
      trainingSpec(
        epochs,
        steps,
        runs.map((r) => r.name),
      ),
      "training",
    ),
    "Left: test accuracy after each epoch. Right: mean sigma of the attention rows during training (what JaSMin pushes down).",
  );
  return section("training", "Training curves", note + chart);
}

function get(obj: unknown, path: string): unknown {
  let v: unknown = obj;
  for (const key of path.split(".")) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

function show(v: unknown): string {
  if (v === undefined) return "—";
  if (v === null) return "null";
  if (typeof v === "number") return formatNumber(v);
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}


function configSection(runs: RunData[]): string {
  const header = ["", ...runs.map((r) => r.name)];
  const analysisKeys = ["source", "data", "inputs", "inputSpace", "seed", "mlp"];
  const rows: Cell[][] = [
    ["folder", ...runs.map((r) => r.dir)],
    ...analysisKeys.map((k) => [`analysis: ${k}`, ...runs.map((r) => show(get(r.analysis, k)))]),
    ["analysis: test examples", ...runs.map((r) => splitCell(r.analysis.split))],
  ];
  // The model the analysis ran on; config.json of the folder when analysis.json does not say.
  const modelOf = (r: RunData) => r.analysis.model ?? r.config ?? {};
  const modelKeys = [...new Set(runs.flatMap((r) => Object.keys(modelOf(r))))];
  for (const k of modelKeys)
    rows.push([`model: ${k}`, ...runs.map((r) => show(get(modelOf(r), k)))]);
  const stateKeys = [
    "epoch",
    "epochs",
    "step",
    "batchSize",
    "seed",
    "data.spec",
    "jasmin.lambda",
    "jasmin.norm",
    "jasmin.reduce",
    "jasmin.layers",
    "optimizer.lr",
    "optimizer.weightDecay",
    "optimizer.warmupSteps",
    "optimizer.clip",
    "augment",
    "pretrained",
    "trainSeconds",
  ];
  if (runs.some((r) => r.trainState !== null)) {
    for (const k of stateKeys)
      rows.push([
        `training: ${k}`,
        ...runs.map((r) => (r.trainState === null ? "—" : show(get(r.trainState, k)))),
      ]);
    rows.push([
      "training: final test accuracy",
      ...runs.map((r) => {
        const h = get(r.trainState, "history");
        const last = Array.isArray(h)
          ? (h.at(-1) as Record<string, unknown> | undefined)
          : undefined;
        return typeof last?.testAccuracy === "number" ? formatPercent(last.testAccuracy) : "—";
      }),
    ]);
  }
  const roles = ["analysis", "attack", "metrics", "config", "trainState"];
  const fileNames: Record<string, string> = {
    analysis: "analysis.json",
    attack: "attack.json",
    metrics: "metrics.jsonl",
    config: "config.json",
    trainState: "train_state.json",
  };
  const files = table(
    ["file", ...runs.map((r) => r.name)],
    roles.map((role) => [fileNames[role], ...runs.map((r) => r.files[role] ?? "not available")]),
    "Files read",
  );
  const stateNote = runs.every((r) => r.trainState === null)
    ? notAvailable("no train_state.json (training settings)")
    : "";
  return section(
    "configuration",
    "Run configuration",
    table(header, rows, "Configuration") + stateNote + files,
  );
}


/**
 * How two runs' training differs apart from JaSMin, in words ("epochs: 3 vs 5"): the model
 * configuration, the data and its size, the seed, the epochs, the batch, the optimizer's
 * settings and the augmentation, from config.json and train_state.json. Empty for fewer than two runs, when a run
 * has no train_state.json, or when they agree.
 *
 * @example trainingDifferences(runs) // ["epochs: 3 vs 5"]
 */
export function trainingDifferences(runs: readonly RunData[]): string[] {
  if (runs.length < 2 || runs.some((r) => r.trainState === null)) return [];
  const at = (value: unknown, path: string): unknown =>
    path
      .split(".")
      .reduce<unknown>(
        (o, k) =>
          o !== null && typeof o === "object" ? (o as Record<string, unknown>)[k] : undefined,
        value,
      );
  const show = (v: unknown) =>
    v === undefined ? "-" : typeof v === "object" ? JSON.stringify(v) : String(v);
  const [a, b] = runs;
  const fields: [string, unknown, unknown][] = [
    ["model", a.config, b.config],
    ...[
      "data.spec",
      "data.trainCount",
      "data.limit",
      "seed",
      "epochs",
      "batchSize",
      "optimizer.lr",
      "optimizer.minLr",
      "optimizer.weightDecay",
      "optimizer.clip",
      "optimizer.warmupSteps",
      "augment",
    ].map(
      (path) =>
        [
          path.replace(/^data\.|^optimizer\./, ""),
          at(a.trainState, path),
          at(b.trainState, path),
        ] as [string, unknown, unknown],
    ),
  ];
  return fields
    .filter(([, x, y]) => JSON.stringify(x) !== JSON.stringify(y))
    .map(
      ([name, x, y]) =>
        `${name}: ${name === "model" ? "different configurations" : `${show(x)} vs ${show(y)}`}`,
    );
}

/**
 * Builds the HTML report comparing one or two runs: a self-contained page (inline CSS and
 * inline SVG charts rendered from Vega-Lite in Node, no scripts, no external references).
 * Sections for which a run has no data say "not available".
 *
 * @param runs one or two run folders (with optional display names).
 * @throws InputError when there are not one or two runs, or a run folder cannot be read
 *   (see {@link loadRun}).
 */
export async function buildReport(runs: ReportRun[], options: ReportOptions = {}): Promise<string> {
  if (runs.length < 1 || runs.length > 2)
    throw new InputError(`report: expected one or two run folders, got ${runs.length}`);
  const names = displayNames(runs);
  const data: RunData[] = [];
  for (let i = 0; i < runs.length; i++) data.push(await loadRun(runs[i].dir, names[i]));
  const mixed = attackDifferences(data);
  if (mixed.length > 0 && options.allowMixed !== true)
    throw new InputError(
      `report: the two runs were attacked differently (${mixed.join("; ")}), so one chart would mix them; attack them alike, or give --allow-mixed to draw them anyway with the differences listed`,
    );
  const trainedApart = trainingDifferences(data);
  if (trainedApart.length > 0)
    options.onWarning?.(
      `the runs were trained differently in more than JaSMin (${trainedApart.join("; ")}); the report says so at its top`,
    );
  const title = options.title ?? `attnlip report: ${names.join(" vs ")}`;
  const maxMapSize = options.maxMapSize ?? 64;

  const sections = [
    await sigmaSection(data),
    await boundsSection(data),
    await robustSection(data),
    await certifySection(data),
    await mapsSection(data, maxMapSize),
    await trainingSection(data),
    configSection(data),
    // Another experiment (the demo's committed study) comes after this run's own sections, under
    // a heading that says so: the top of the page is about these runs only.
    ...(options.note !== undefined
      ? [
          section(
            "other-experiment",
            "Beside these runs: another experiment",
            `<div class="howto"><strong>${escapeHtml(options.note.heading)}</strong><ul>${options.note.lines.map((l) => `<li>${escapeHtml(l)}</li>`).join("")}</ul></div>`,
          ),
        ]
      : []),
  ];
  const contents = [
    ["sigma", "Attention rows: sigma against p(1)"],
    ["distributions", "Distributions of p(1) and sigma"],
    ["bounds", "Bounds against the true value"],
    ["robustness", "Robust accuracy"],
    ["certify", "Certified accuracy"],
    ["attention-maps", "Attention maps"],
    ["training", "Training curves"],
    ["configuration", "Run configuration"],
    ["other-experiment", "Another experiment"],
  ].filter(([id]) => sections.some((s) => s.includes(`<section id="${id}">`)));
  const runLine = data
    .map(
      (r, i) =>
        `${swatch(i)}<strong>${escapeHtml(r.name)}</strong> <small>(${escapeHtml(r.dir)})</small>`,
    )
    .join(" &nbsp;vs&nbsp; ");
  // Checkpoints of 28x28 grey ViTs open in the explorer (attnlip explore), which a static file
  // cannot start: the report gives the command.
  const explorable = data.filter((r) => {
    const c = r.config as { kind?: string; imageSize?: number; channels?: number } | null;
    return r.trainState !== null && c?.kind === "vit" && c.imageSize === 28 && c.channels === 1;
  });
  const body = [
    `<h1>${escapeHtml(title)}</h1>`,
    `<p class="runs">${runLine}</p>`,
    ...(explorable.length > 0
      ? [
          `<p class="explore">In a browser, draw digits for ${explorable.length > 1 ? "these models" : "this model"}, attack them and see every bound beside the true value: ${explorable
            .map((r) => `<code>attnlip explore ${escapeHtml(r.dir)}</code>`)
            .join(", ")}.</p>`,
        ]
      : []),
    ...(trainedApart.length > 0
      ? [
          warning(
            `These runs were trained differently in more than JaSMin (${trainedApart.join("; ")}): a difference in their results may come from these as well.`,
          ),
        ]
      : []),
    findingsBox(findingsOf(data)),
    `<div class="howto"><strong>How to read this report.</strong> ${HOW_TO_READ}</div>`,
    `<nav><ol>${contents.map(([id, t]) => `<li><a href="#${id}">${escapeHtml(t)}</a></li>`).join("")}</ol></nav>`,
    ...sections,
    `<footer>Made by attnlip report. Charts: Vega-Lite, rendered to SVG without a browser. This file needs no network.</footer>`,
  ];
  return page(title, body.join("\n"));
}

/** The top box: what these runs found and their settings ({@link findingsOf}), escaped. */
function findingsBox(f: Findings): string {
  const list = (lines: string[]) =>
    `<ul>${lines.map((l) => `<li>${escapeHtml(l)}</li>`).join("")}</ul>`;
  return (
    `<div class="howto findings" id="findings"><strong>${escapeHtml(f.heading)}</strong>` +
    (f.lines.length > 0
      ? list(f.lines)
      : `<p>${escapeHtml("No results to compare: analysis.json has no network true value and there is no attack.json.")}</p>`) +
    (f.settings.length > 0 ? `<strong>Settings</strong>${list(f.settings)}` : "") +
    "</div>"
  );
}

/** Writes the report atomically (a temporary file, then rename), creating the folder. */
export async function writeReport(path: string, html: string): Promise<void> {
  await writeFileAtomically(path, html);
}
