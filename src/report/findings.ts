import { attackLabel, orderAttacks } from "../robustness/attacks.ts";
import { layerSummaries } from "./data.ts";
import { formatNumber, formatPercent } from "./html.ts";
import type { RunData } from "./load.ts";

/**
 * The report's top box: what THESE runs found, in words computed from their files (the true
 * network Lipschitz constant, robust accuracy per attack and radius, the attention rows' mean
 * sigma, the closest network bound), and the settings they ran with. Nothing here comes from
 * another experiment.
 */

/** What {@link findingsOf} returns: plain-text lines (the report escapes them). */
export interface Findings {
  /** "What this run found" or "What these runs found". */
  heading: string;
  /** One finding per line. */
  lines: string[];
  /** The runs' settings, one aspect per line ("model: ...", "attack: ..."). */
  settings: string[];
}

/** The median true network Lipschitz constant of a run, or null when analysis.json has none. */
function networkTrue(run: RunData): number | null {
  const net = layerSummaries(run).find((s) => s.layer === "network");
  return net?.true?.median ?? null;
}

/** Mean sigma of the sampled attention rows, or null. */
function meanSigma(run: RunData): number | null {
  const s = run.analysis.attentionRows?.sigma;
  return s === undefined || s.length === 0 ? null : s.reduce((a, b) => a + b, 0) / s.length;
}

/** "30.7% lower" / "2.1% higher" / "the same" for b against a (both positive). */
function relative(b: number, a: number): string {
  if (formatNumber(a) === formatNumber(b)) return "the same to 4 digits";
  const change = (100 * (b - a)) / a;
  return `${Math.abs(change).toFixed(1)}% ${change < 0 ? "lower" : "higher"}`;
}

/** "up 6.0 points" / "down 2.0 points" / "the same" for accuracies b against a (fractions). */
function points(b: number, a: number): { word: "up" | "down" | "same"; text: string } {
  if (formatPercent(a) === formatPercent(b)) return { word: "same", text: "the same" };
  const d = 100 * (b - a);
  return {
    word: d > 0 ? "up" : "down",
    text: `${d > 0 ? "up" : "down"} ${Math.abs(d).toFixed(1)} points`,
  };
}

/** Robust accuracy of a run at eps under an attack, or null. */
function robustAt(run: RunData, eps: number, attack: string): number | null {
  const r = run.attack?.results.find((x) => x.eps === eps)?.robust[attack];
  return typeof r === "number" && Number.isFinite(r) ? r : null;
}

/** Lines about the true network constant (one run: its value; two: which is lower, by how much). */
function lipschitzLines(runs: readonly RunData[]): string[] {
  const values = runs.map(networkTrue);
  const inputs = (r: RunData) => `${r.analysis.inputs ?? "?"} analysed inputs`;
  if (runs.length === 1 || values.some((v) => v === null || !(v > 0)))
    return runs.flatMap((r, i) =>
      values[i] === null
        ? []
        : [
            `${runs.length > 1 ? `${r.name}: ` : ""}true network Lipschitz constant ${formatNumber(values[i])} (median over ${inputs(r)}).`,
          ],
    );
  const [a, b] = values as [number, number];
  const [ra, rb] = runs;
  const over = (x: RunData, y: RunData) =>
    x.analysis.inputs === y.analysis.inputs
      ? `medians over ${inputs(x)} each`
      : `medians over ${inputs(x)} and ${inputs(y)}`;
  const same = formatNumber(a) === formatNumber(b);
  const [low, high, lowV, highV] = b < a ? [rb, ra, b, a] : [ra, rb, a, b];
  return [
    same
      ? `The true network Lipschitz constant is the same for both runs to 4 digits: ${formatNumber(a)} (${over(ra, rb)}).`
      : `${low.name} has the lower true network Lipschitz constant: ${formatNumber(lowV)} against ${formatNumber(highV)} for ${high.name}, ${relative(lowV, highV)} (${over(low, high)}; exact at each input).`,
  ];
}

/** Lines about clean and robust accuracy: per run, or the second run against the first per radius. */
function robustnessLines(runs: readonly RunData[]): string[] {
  const attacked = runs.filter((r) => r.attack !== null);
  if (attacked.length === 0) return [];
  const attacks = orderAttacks(
    attacked.flatMap((r) => r.attack!.results.flatMap((x) => Object.keys(x.robust))),
  );
  const radii = (r: RunData) =>
    [...new Set(r.attack!.results.map((x) => x.eps))].filter((e) => e !== 0).sort((x, y) => x - y);
  const norm = (r: RunData) => (r.attack!.norm === "linf" ? "l∞" : "l2");
  if (attacked.length === 1 || attacked[0].attack!.norm !== attacked[1].attack!.norm) {
    return attacked.flatMap((r) => {
      const who = attacked.length > 1 ? `${r.name}: ` : "";
      return [
        `${who}clean accuracy ${formatPercent(r.attack!.cleanAccuracy)} on ${formatNumber(r.attack!.n)} attacked inputs.`,
        ...attacks.map(
          (a) =>
            `${who}${attackLabel(a)} robust accuracy (${norm(r)}): ${radii(r)
              .map((e) => `eps ${formatNumber(e)} ${formatPercent(robustAt(r, e, a))}`)
              .join(", ")}.`,
        ),
      ];
    });
  }
  const [ra, rb] = attacked;
  const lines: string[] = [];
  const ca = ra.attack!.cleanAccuracy;
  const cb = rb.attack!.cleanAccuracy;
  if (typeof ca === "number" && typeof cb === "number")
    lines.push(
      `Clean accuracy: ${rb.name} ${formatPercent(cb)} against ${formatPercent(ca)} for ${ra.name} (${points(cb, ca).text}; ${formatNumber(rb.attack!.n)} and ${formatNumber(ra.attack!.n)} attacked inputs).`,
    );
  const common = radii(ra).filter((e) => radii(rb).includes(e));
  for (const a of attacks) {
    const rows = common
      .map((e) => ({ e, x: robustAt(ra, e, a), y: robustAt(rb, e, a) }))
      .filter((r): r is { e: number; x: number; y: number } => r.x !== null && r.y !== null);
    if (rows.length === 0) continue;
    const moves = rows.map((r) => ({ ...r, ...points(r.y, r.x) }));
    const count = (w: string) => moves.filter((m) => m.word === w).length;
    const tally = [
      count("up") > 0 ? `higher at ${count("up")}` : null,
      count("down") > 0 ? `lower at ${count("down")}` : null,
      count("same") > 0 ? `the same at ${count("same")}` : null,
    ]
      .filter((t) => t !== null)
      .join(", ");
    lines.push(
      `${attackLabel(a)} robust accuracy (${norm(ra)}) of ${rb.name} against ${ra.name}: ${tally} of ${rows.length} radi${rows.length === 1 ? "us" : "i"} (` +
        moves
          .map(
            (m) =>
              `eps ${formatNumber(m.e)}: ${formatPercent(m.y)} against ${formatPercent(m.x)}, ${m.text}`,
          )
          .join("; ") +
        ").",
    );
  }
  return lines;
}

/** The attention rows' mean sigma (what JaSMin lowers) and the closest network bound per run. */
function attentionLines(runs: readonly RunData[]): string[] {
  const lines: string[] = [];
  const sigmas = runs.map(meanSigma);
  if (runs.length === 2 && sigmas.every((s) => s !== null && s > 0)) {
    const [a, b] = sigmas as [number, number];
    lines.push(
      `Mean sigma of the sampled attention rows (what JaSMin pushes down): ${runs[1].name} ${formatNumber(b)} against ${formatNumber(a)} for ${runs[0].name}, ${relative(b, a)}.`,
    );
  } else
    runs.forEach((r, i) => {
      if (sigmas[i] !== null)
        lines.push(
          `${runs.length > 1 ? `${r.name}: ` : ""}mean sigma of the sampled attention rows ${formatNumber(sigmas[i])}.`,
        );
    });
  const closest = runs.map((r) => {
    const net = layerSummaries(r).find((s) => s.layer === "network");
    const ratios = Object.entries(net?.ratios ?? {}).filter(
      (e): e is [string, NonNullable<(typeof e)[1]>] => e[1] !== null && e[1].median > 0,
    );
    if (ratios.length === 0) return null;
    const [variant, s] = ratios.reduce((best, e) => (e[1].median < best[1].median ? e : best));
    return `${runs.length > 1 ? `${r.name} ` : ""}${variant}, ${formatNumber(s.median)}`;
  });
  if (closest.some((c) => c !== null))
    lines.push(
      `Closest network bound, median bound/true (1 would be exact, bigger is looser): ${closest.filter((c) => c !== null).join("; ")}.`,
    );
  return lines;
}

/** A run's model in words: "vit, 1 block, d_model 16, 2 heads". */
function modelWords(run: RunData): string | null {
  const m = (run.analysis.model ?? run.config) as Record<string, unknown> | null | undefined;
  if (m === null || m === undefined) return null;
  const parts = [
    typeof m.kind === "string" ? m.kind : null,
    typeof m.blocks === "number" ? `${m.blocks} block${m.blocks === 1 ? "" : "s"}` : null,
    typeof m.dModel === "number" ? `d_model ${m.dModel}` : null,
    typeof m.heads === "number" ? `${m.heads} heads` : null,
    typeof m.attention === "string" && m.attention !== "dot" ? `${m.attention} attention` : null,
  ].filter((p) => p !== null);
  return parts.length === 0 ? null : parts.join(", ");
}

/** A run's training in words, from train_state.json: data, examples, epochs, JaSMin. */
function trainingWords(run: RunData): string | null {
  const s = run.trainState as {
    epochs?: unknown;
    data?: { spec?: unknown; trainCount?: unknown };
    jasmin?: { lambda?: unknown; norm?: unknown; reduce?: unknown };
  } | null;
  if (s === null) return null;
  const lambda = s.jasmin?.lambda;
  const jasmin =
    typeof lambda !== "number"
      ? "JaSMin not recorded"
      : lambda === 0
        ? "no JaSMin (lambda 0)"
        : `JaSMin lambda ${formatNumber(lambda)}${typeof s.jasmin?.norm === "string" ? ` (${s.jasmin.norm}${typeof s.jasmin.reduce === "string" ? ` / ${s.jasmin.reduce}` : ""})` : ""}`;
  return [
    typeof s.data?.spec === "string" ? s.data.spec : null,
    typeof s.data?.trainCount === "number" ? `${s.data.trainCount} training examples` : null,
    typeof s.epochs === "number" ? `${s.epochs} epoch${s.epochs === 1 ? "" : "s"}` : null,
    jasmin,
  ]
    .filter((p) => p !== null)
    .join(", ");
}

/** A run's attack in words: "PGD and FGSM, l∞, eps 0.01, 0.02, 10 steps, 64 inputs of mnist". */
function attackWords(run: RunData): string | null {
  const a = run.attack;
  if (a === null) return null;
  const names = orderAttacks(a.results.flatMap((x) => Object.keys(x.robust))).map(attackLabel);
  const eps = [...new Set(a.results.map((x) => x.eps))]
    .filter((e) => e !== 0)
    .sort((x, y) => x - y)
    .map(formatNumber);
  return [
    names.join(" and "),
    a.norm === "linf" ? "l∞" : "l2",
    `eps ${eps.join(", ")}`,
    typeof a.steps === "number" ? `${a.steps} steps` : null,
    `${formatNumber(a.n)} inputs${a.data === undefined ? "" : ` of ${a.data}`}`,
  ]
    .filter((p) => p !== null)
    .join(", ");
}

/** One settings line: said once when every run agrees, else per run. */
function settingLine(
  what: string,
  runs: readonly RunData[],
  of: (r: RunData) => string | null,
): string[] {
  const values = runs.map(of);
  if (values.every((v) => v === null)) return [];
  if (values.every((v) => v === values[0])) return [`${what}: ${values[0]}`];
  return [`${what}: ${runs.map((r, i) => `${r.name}: ${values[i] ?? "not recorded"}`).join("; ")}`];
}

/**
 * What one or two runs found and how they ran, in words computed from their files: with two
 * runs, which has the lower true network Lipschitz constant and by how much, and whether the
 * second run's robust accuracy is up or down against the first at each radius of each attack;
 * with one, its values. Then the runs' settings (model, training, analysis, attack), each said
 * once where the runs agree.
 *
 * @param runs one or two loaded run folders (loadRun), the second compared with the first.
 * @returns plain-text lines; empty `lines` when the files hold none of these results.
 * @example findingsOf([baseline, jasmin]).lines[0]
 *   // "jasmin has the lower true network Lipschitz constant: 34.98 against 50.49 for baseline, 30.7% lower (...)"
 */
export function findingsOf(runs: readonly RunData[]): Findings {
  const lines = [...lipschitzLines(runs), ...robustnessLines(runs), ...attentionLines(runs)];
  if (runs.length === 2 && lines.length > 0)
    lines.push(
      "Each is one training run: with one seed, a difference of this size can be seed-to-seed noise (attnlip study repeats the runs over seeds and gives intervals).",
    );
  const settings = [
    ...settingLine("model", runs, modelWords),
    ...settingLine("training", runs, trainingWords),
    ...settingLine(
      "analysis",
      runs,
      (r) =>
        `${r.analysis.inputs ?? "?"} inputs${r.analysis.data === undefined ? "" : ` of ${r.analysis.data}`}` +
        (r.analysis.mlp === undefined ? "" : `, MLP rule ${r.analysis.mlp}`),
    ),
    ...settingLine("attack", runs, attackWords),
  ];
  return {
    heading: runs.length > 1 ? "What these runs found" : "What this run found",
    lines,
    settings,
  };
}
