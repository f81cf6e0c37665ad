import { attackLabel, attacksReading, orderAttacks } from "../robustness/attacks.ts";
import type { Summary } from "../stats.ts";
import { missingNote, quartiles, splitCell } from "./cells.ts";
import { dashName, robustSpec, type RobustPoint } from "./charts.ts";
import {
  escapeHtml,
  figure,
  formatNumber,
  formatPercent,
  section,
  table,
  warning,
  type Cell,
} from "./html.ts";
import type { RunData } from "./load.ts";
import { renderVegaLite } from "./render.ts";

/**
 * The report's robustness section (attack.json): robust accuracy against epsilon per attack, the
 * warnings of gradient masking, the attack settings and the Lipschitz proxy radius.
 */

/** The runs with an attack.json, the attacks any of them holds (registry order) and their labels. */
interface Attacked {
  runs: RunData[];
  withAttack: RunData[];
  attacks: string[];
  labels: string[];
}

/** The chart's points: each run's accuracy per attack and epsilon (epsilon 0: clean accuracy). */
function robustPoints({ withAttack, attacks, labels }: Attacked): RobustPoint[] {
  const points: RobustPoint[] = [];
  for (const run of withAttack) {
    const a = run.attack!;
    const hasZero = a.results.some((r) => r.eps === 0);
    if (!hasZero && typeof a.cleanAccuracy === "number")
      for (const label of labels)
        points.push({ run: run.name, eps: 0, attack: label, accuracy: a.cleanAccuracy });
    for (const r of a.results)
      attacks.forEach((name, k) => {
        const accuracy = r.robust[name];
        if (typeof accuracy === "number")
          points.push({ run: run.name, eps: r.eps, attack: labels[k], accuracy });
      });
  }
  return points;
}

/** The robust-accuracy chart. */
async function robustChart(at: Attacked): Promise<string> {
  const { runs, withAttack, labels } = at;
  const norms = [...new Set(withAttack.map((r) => (r.attack!.norm === "linf" ? "l∞" : "l2")))];
  return figure(
    "robustness",
    await renderVegaLite(
      robustSpec(
        robustPoints(at),
        runs.map((r) => r.name),
        `epsilon (${norms.join(" / ")} norm)`,
        labels,
      ),
      "robustness",
    ),
    `Accuracy under attack against the attack radius epsilon: ${labels.map((l, k) => `${l} ${dashName(k)}`).join(", ")}; epsilon 0 is the clean accuracy. Higher is more robust.`,
  );
}

/**
 * The table of clean and robust accuracy per epsilon; a cell where some inputs' loss gradient
 * was exactly zero says so (robust accuracy there is gradient masking, not robustness).
 */
function accuracyTable({ withAttack, attacks, labels }: Attacked): string {
  const epsValues = [
    ...new Set(withAttack.flatMap((r) => r.attack!.results.map((x) => x.eps))),
  ].sort((a, b) => a - b);
  const resultAt = (r: RunData, eps: number) => r.attack!.results.find((x) => x.eps === eps);
  const accuracyCell = (r: RunData, eps: number, a: string): Cell => {
    const acc = formatPercent(resultAt(r, eps)?.robust[a]);
    const zero = resultAt(r, eps)?.zeroGradient?.[a] ?? null;
    if (zero === null || !(zero > 0)) return acc;
    return {
      html: `${escapeHtml(acc)} <span class="warn" title="fraction of inputs with an exactly zero loss gradient">⚠ ${escapeHtml(formatPercent(zero))} zero grad.</span>`,
      num: true,
    };
  };
  const header = ["epsilon", ...withAttack.flatMap((r) => labels.map((l) => `${r.name} ${l}`))];
  // eps 0 is the clean accuracy by construction (tested): the "clean (eps 0)" row stands for it.
  const rows: Cell[][] = [
    [
      "clean (eps 0)",
      ...withAttack.flatMap((r) => attacks.map(() => formatPercent(r.attack!.cleanAccuracy))),
    ],
    ...epsValues
      .filter((eps) => eps !== 0)
      .map((eps) => [
        formatNumber(eps),
        ...withAttack.flatMap((r) => attacks.map((a) => accuracyCell(r, eps, a))),
      ]),
  ];
  return table(
    header,
    rows,
    "Clean and robust accuracy per epsilon (⚠: fraction of inputs whose loss gradient was exactly zero under that attack, a sign of gradient masking)",
  );
}

/**
 * The warnings of gradient masking: inputs with an exactly zero loss gradient, and each masking
 * check of attack.json that fired (robustness/masking.ts).
 */
function maskingWarnings({ runs, withAttack, attacks }: Attacked): string {
  const masked = withAttack.flatMap((r) =>
    r.attack!.results.flatMap((x) =>
      attacks
        .filter((a) => (x.zeroGradient?.[a] ?? 0) > 0)
        .map(
          (a) =>
            `${runs.length > 1 ? `${r.name} ` : ""}${attackLabel(a)} at epsilon ${formatNumber(x.eps)}: ${formatPercent(x.zeroGradient![a])}`,
        ),
    ),
  );
  const maskNote =
    masked.length === 0
      ? ""
      : warning(
          `the loss gradient was exactly zero for some inputs (${masked.join("; ")}). The attack had no direction there, so their robust accuracy is a sign of gradient masking, not of robustness.`,
        );
  const checkNotes = withAttack
    .flatMap((r) =>
      (r.attack!.masking?.warnings ?? []).map(
        (w) => `${runs.length > 1 ? `${r.name}: ` : ""}masking check: ${w}`,
      ),
    )
    .map((line) => warning(line))
    .join("");
  return maskNote + checkNotes;
}

/** Per attack, the largest fraction of inputs with a zero gradient over epsilon ("—": none recorded). */
function zeroSummary(r: RunData, attacks: readonly string[]): string {
  const values = attacks.map((a) => {
    const fractions = r
      .attack!.results.map((x) => x.zeroGradient?.[a])
      .filter((v): v is number => typeof v === "number");
    return fractions.length === 0
      ? null
      : `${attackLabel(a)} ${formatPercent(Math.max(...fractions))}`;
  });
  const shown = values.filter((v): v is string => v !== null);
  return shown.length === 0 ? "—" : shown.join(", ");
}

/** The attack settings, each labelled with the attacks that read it (the registry's options). */
function settingsTable({ withAttack, attacks }: Attacked): string {
  const readers = (setting: "steps" | "stepSize" | "restarts", fallback: string) =>
    attacksReading(setting, attacks).map(attackLabel).join("/") || fallback;
  const iterative = readers("steps", "PGD");
  const stepped = readers("stepSize", "PGD");
  const restarting = withAttack.some((r) => r.attack!.restarts !== undefined);
  return table(
    ["setting", ...withAttack.map((r) => r.name)],
    [
      ["norm", ...withAttack.map((r) => r.attack!.norm)],
      ["inputs", ...withAttack.map((r) => formatNumber(r.attack!.n))],
      [`${iterative} steps`, ...withAttack.map((r) => formatNumber(r.attack!.steps))],
      [
        `${stepped} step size`,
        ...withAttack.map((r) =>
          r.attack!.stepSize == null ? "2.5 eps / steps" : formatNumber(r.attack!.stepSize),
        ),
      ],
      ...(restarting
        ? [
            [
              `${readers("restarts", "APGD")} runs (restarts)`,
              ...withAttack.map((r) =>
                r.attack!.restarts === undefined ? "—" : formatNumber(r.attack!.restarts),
              ),
            ],
          ]
        : []),
      ["seed", ...withAttack.map((r) => formatNumber(r.attack!.seed))],
      ["data", ...withAttack.map((r) => r.attack!.data ?? "—")],
      ["test examples", ...withAttack.map((r) => splitCell(r.attack!.split))],
      [
        "inputs with a zero gradient (max over epsilon)",
        ...withAttack.map((r) => zeroSummary(r, attacks)),
      ],
      ["seconds", ...withAttack.map((r) => formatNumber(r.attack!.seconds))],
    ],
    "Attack settings",
  );
}

/**
 * The Lipschitz proxy radius (a result, with its norm and unit, not a setting; it stays called
 * a proxy); "" when no run has one.
 */
function proxyTable({ withAttack }: Attacked): string {
  if (!withAttack.some((r) => r.attack!.proxy !== undefined)) return "";
  const spaces = new Set(withAttack.map((r) => r.analysis.inputSpace ?? "image"));
  const units =
    spaces.size > 1
      ? "input units (pixels for images, embedding units for text)"
      : spaces.has("embedding")
        ? "token-embedding units"
        : "pixel units";
  return table(
    ["", ...withAttack.map((r) => r.name)],
    [
      [
        "median (q1–q3)",
        ...withAttack.map((r): Cell => {
          const p = r.attack!.proxy;
          return p === undefined
            ? "—"
            : quartiles({
                median: p.median ?? NaN,
                q1: p.q1 ?? NaN,
                q3: p.q3 ?? NaN,
              } as Summary);
        }),
      ],
      [
        "misclassified (radius 0)",
        ...withAttack.map((r) => formatNumber(r.attack!.proxy?.misclassified)),
      ],
    ],
    `Lipschitz proxy radius: margin / (sqrt 2 · L), an l2 radius in ${units}, with L the exact local Lipschitz constant at the input; a proxy, not a certificate (L holds at the input only, not in a ball around it)`,
  );
}

/**
 * The robustness section: a "not available" note for runs without attack.json; for the others,
 * the chart, the masking warnings, the accuracy table, the proxy radius and the settings, with
 * a warning when the runs were attacked differently ({@link attackDifferences}).
 *
 * @example await robustSection(runs) // "<section id=\"robustness\">..."
 */
export async function robustSection(runs: RunData[]): Promise<string> {
  const withAttack = runs.filter((r) => r.attack !== null);
  const note = missingNote(
    runs,
    runs.filter((r) => r.attack === null),
    "no attack.json",
  );
  if (withAttack.length === 0)
    return section("robustness", "Robust accuracy against epsilon", note);
  // Columns, lines and notes per attack: every attack any run's attack.json holds, in the
  // registry's order (pgd, fgsm, then others), labelled by the registry.
  const attacks = orderAttacks(
    withAttack.flatMap((r) => r.attack!.results.flatMap((x) => Object.keys(x.robust))),
  );
  const at: Attacked = { runs, withAttack, attacks, labels: attacks.map(attackLabel) };
  const differences = attackDifferences(runs);
  const mixedNote =
    differences.length === 0
      ? ""
      : warning(
          `these runs were attacked differently (drawn together with --allow-mixed): ${differences.join("; ")}. Compare their curves with care.`,
        );
  return section(
    "robustness",
    "Robust accuracy against epsilon",
    note +
      mixedNote +
      (await robustChart(at)) +
      maskingWarnings(at) +
      accuracyTable(at) +
      proxyTable(at) +
      settingsTable(at),
  );
}

/**
 * How two runs' attack.json settings differ, in words ("norm: linf vs l2", "eps: 0, 0.01 vs
 * 0, 0.05, ..."): the norm, the radii, the attacks, the number of inputs, the steps and the
 * restarts. Empty when there are fewer than two attacked runs or when they agree.
 *
 * @example attackDifferences(runs) // ["inputs: 80 vs 64"]
 */
export function attackDifferences(runs: readonly RunData[]): string[] {
  const attacked = runs.filter((r) => r.attack !== null);
  if (attacked.length < 2) return [];
  const [a, b] = attacked.map((r) => r.attack!);
  const list = (xs: readonly unknown[]) => xs.map(String).join(", ");
  const attacksOf = (f: typeof a) =>
    list([...new Set(f.results.flatMap((x) => Object.keys(x.robust)))].sort());
  const fields: [string, string, string][] = [
    ["norm", a.norm, b.norm],
    ["eps", list(a.results.map((x) => x.eps)), list(b.results.map((x) => x.eps))],
    ["attacks", attacksOf(a), attacksOf(b)],
    ["inputs", String(a.n ?? "?"), String(b.n ?? "?")],
    ["steps", String(a.steps ?? "?"), String(b.steps ?? "?")],
    ["restarts", String(a.restarts ?? 1), String(b.restarts ?? 1)],
  ];
  return fields.filter(([, x, y]) => x !== y).map(([name, x, y]) => `${name}: ${x} vs ${y}`);
}
