import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { TopLevelSpec } from "vega-lite";
import { CertifyFileSchema, type CertifyFile } from "../certify/certifyFile.ts";
import { DuplicateKeyError, parseJsonStrict } from "../io/strictJson.ts";
import { InputError } from "../util/errors.ts";
import { firstIssue } from "../util/zodIssue.ts";
import { RUN_COLOURS } from "./charts.ts";
import {
  escapeHtml,
  figure,
  formatNumber,
  formatPercent,
  section,
  table,
  warning,
} from "./html.ts";
import type { RunData } from "./load.ts";
import { renderVegaLite } from "./render.ts";

/**
 * The report's certify section (`attnlip certify`'s certify.json beside attack.json): certified
 * accuracy against the radius, with the distribution-aware bound and with the softmax constant
 * 1/2, beside the robust accuracy the strongest attack left at each of attack.json's radii.
 * Certified accuracy is a lower bound of the true robust accuracy (no input in a certified
 * ball changes its prediction); the attack's is an upper bound (what it did not break may still
 * break). Absent when no run folder holds certify.json.
 */

/** One run's certify.json (its folder's, or `certify/certify.json`), or null. */
export async function loadCertify(dir: string): Promise<{ path: string; doc: CertifyFile } | null> {
  for (const path of [join(dir, "certify.json"), join(dir, "certify", "certify.json")]) {
    const isFile = await stat(path).then(
      (s) => s.isFile(),
      () => false,
    );
    if (!isFile) continue;
    let value: unknown;
    try {
      value = parseJsonStrict(await readFile(path, "utf8"));
    } catch (e) {
      if (e instanceof DuplicateKeyError) throw new InputError(`${path}: ${e.message}`);
      throw new InputError(`${path}: invalid JSON (${(e as Error).message})`);
    }
    const parsed = CertifyFileSchema.safeParse(value);
    if (!parsed.success) throw new InputError(`${path}: ${firstIssue(parsed.error, value)}`);
    return { path, doc: parsed.data };
  }
  return null;
}

/** A point of the chart: a run's accuracy of one kind at one radius. */
interface Point {
  run: string;
  series: string;
  radius: number;
  accuracy: number;
}

const SERIES = [
  "certified (distribution-aware)",
  "certified (1/2)",
  "robust under the strongest attack",
];
const DASHES = [
  [1, 0],
  [6, 3],
  [2, 2],
];

/**
 * Certified accuracy at radius rho, from the per-input certified radii: the share of inputs
 * correctly classified with a certified radius of at least rho (each passed the test at its
 * own radius, so at every smaller one), a lower bound of the certified accuracy at rho.
 */
function certifiedAt(doc: CertifyFile, rule: "dist" | "half", rho: number): number {
  const n = Math.max(doc.inputs.length, 1);
  return doc.inputs.filter((x) => x.correct && (x[rule].radius ?? Infinity) >= rho).length / n;
}

/** The chart's points of one run (positive radii only: the x axis is logarithmic). */
function pointsOf(name: string, doc: CertifyFile, attack: RunData["attack"]): Point[] {
  const radii = new Set(doc.radii.filter((r) => r > 0));
  for (const x of doc.inputs)
    for (const rule of ["dist", "half"] as const) {
      const r = x[rule].radius;
      if (x.correct && r !== null && r > 0) radii.add(r);
    }
  const attackRadii =
    attack !== null && attack.norm === doc.norm ? attack.results.filter((x) => x.eps > 0) : [];
  for (const a of attackRadii) radii.add(a.eps);
  const sorted = [...radii].sort((a, b) => a - b);
  const points: Point[] = [];
  for (const radius of sorted) {
    points.push({
      run: name,
      series: SERIES[0],
      radius,
      accuracy: certifiedAt(doc, "dist", radius),
    });
    points.push({
      run: name,
      series: SERIES[1],
      radius,
      accuracy: certifiedAt(doc, "half", radius),
    });
  }
  for (const a of attackRadii) {
    const values = Object.values(a.robust).filter((v): v is number => typeof v === "number");
    if (values.length > 0)
      points.push({ run: name, series: SERIES[2], radius: a.eps, accuracy: Math.min(...values) });
  }
  return points;
}

/**
 * Certified accuracy (both bounds) and the attack's robust accuracy against the radius, log x.
 *
 * @example certifySpec(points, ["baseline"], "l2 radius (input units, log scale)")
 */
export function certifySpec(points: Point[], runs: string[], title: string): TopLevelSpec {
  const x = {
    field: "radius",
    type: "quantitative",
    scale: { type: "log" },
    axis: { format: ".0e" },
    title,
  };
  const y = {
    field: "accuracy",
    type: "quantitative",
    scale: { domain: [0, 1] },
    axis: { format: "%" },
    title: "accuracy",
  };
  const colour = {
    field: "run",
    type: "nominal",
    scale: { domain: runs, range: RUN_COLOURS.slice(0, runs.length) },
    title: "run",
  };
  return {
    data: { values: points },
    width: 460,
    height: 280,
    layer: [
      {
        mark: { type: "line", strokeWidth: 2, interpolate: "step-after" },
        transform: [{ filter: `datum.series !== '${SERIES[2]}'` }],
        encoding: {
          x,
          y,
          color: colour,
          strokeDash: {
            field: "series",
            type: "nominal",
            scale: { domain: SERIES, range: DASHES },
            title: "accuracy",
            legend: { symbolStrokeColor: "#333", symbolStrokeWidth: 2, labelLimit: 300 },
          },
          detail: { field: "series" },
        },
      },
      {
        mark: { type: "line", strokeWidth: 2, point: { filled: true, size: 40 } },
        transform: [{ filter: `datum.series === '${SERIES[2]}'` }],
        encoding: {
          x,
          y,
          color: colour,
          strokeDash: {
            field: "series",
            type: "nominal",
            scale: { domain: SERIES, range: DASHES },
            legend: null,
          },
        },
      },
    ],
  } as unknown as TopLevelSpec;
}

/**
 * The section: the chart, each run's table of certified accuracy at its radii with the
 * attack's robust accuracy where the radii meet, the median certified radii and factor, and a
 * warning when certify.json and attack.json are not on the same inputs or norm. "" when no run
 * holds certify.json.
 *
 * @throws InputError naming certify.json when one is unreadable or malformed.
 */
export async function certifySection(runs: RunData[]): Promise<string> {
  const loaded = await Promise.all(runs.map((r) => loadCertify(r.dir)));
  const present = runs.flatMap((run, i) =>
    loaded[i] === null ? [] : [{ run, doc: loaded[i]!.doc }],
  );
  if (present.length === 0) return "";
  const notes: string[] = [];
  for (const { run, doc } of present) {
    const a = run.attack;
    if (a === null) continue;
    if (a.norm !== doc.norm)
      notes.push(
        `${run.name}: attack.json is ${a.norm}, certify.json ${doc.norm}: the attack is not drawn`,
      );
    else if (
      a.split?.evaluatedDigest !== undefined &&
      doc.split?.evaluatedDigest !== undefined &&
      a.split.evaluatedDigest !== doc.split.evaluatedDigest
    )
      notes.push(
        `${run.name}: certify.json and attack.json are on different inputs (${doc.n} and ${a.n ?? "?"} examples): the two curves do not bound the same robust accuracy`,
      );
  }
  const points = present.flatMap(({ run, doc }) => pointsOf(run.name, doc, run.attack));
  const norms = [...new Set(present.map(({ doc }) => doc.norm))];
  const units = [...new Set(present.map(({ doc }) => doc.units))];
  const title = `${norms.map((n) => (n === "linf" ? "l∞" : "l2")).join(" / ")} radius (${units.join(" / ")} units, log scale)`;
  const chart = figure(
    "certify",
    await renderVegaLite(
      certifySpec(
        points,
        present.map(({ run }) => run.name),
        title,
      ),
      "certify",
    ),
    "Certified accuracy (correctly classified and certified: no input in the ball changes the prediction), a lower bound of the true robust accuracy, with the distribution-aware bound (solid) and with the softmax constant 1/2 (dashed); beside it the accuracy the strongest attack of attack.json left (dotted, points), an upper bound of it. Radius 0 is off the log axis: it is the clean accuracy.",
  );
  const tables = present.map(({ run, doc }) => {
    const attackAt = (r: number) => {
      const row =
        run.attack !== null && run.attack.norm === doc.norm
          ? run.attack.results.find((x) => x.eps === r)
          : undefined;
      const values =
        row === undefined
          ? []
          : Object.values(row.robust).filter((v): v is number => typeof v === "number");
      return values.length === 0 ? "—" : formatPercent(Math.min(...values));
    };
    const s = doc.summary;
    const rows = s.certifiedAccuracy.map((a) => [
      formatNumber(a.radius),
      formatPercent(a.dist),
      formatPercent(a.half),
      attackAt(a.radius),
    ]);
    return table(
      [
        `radius (${doc.norm})`,
        "certified (distribution-aware)",
        "certified (1/2)",
        "robust (attack)",
      ],
      rows,
      `${run.name}: ${doc.n} inputs, clean accuracy ${formatPercent(doc.cleanAccuracy)}; median certified radius of the correct inputs ${formatNumber(s.medianRadius.dist)} (distribution-aware) and ${formatNumber(s.medianRadius.half)} (1/2), median factor ${formatNumber(s.medianFactor)}`,
    );
  });
  const how = `<div class="howto"><p>${escapeHtml(
    "attnlip certify bounds the logits' Jacobian norm over the whole ball B(x, r), L(x, r), layer by layer (docs/math.md section 7); no input within r changes the prediction when margin > sqrt(2) L(x, r) r. The distribution-aware bound takes each attention row's largest softmax-Jacobian norm over the probabilities the ball allows; the prior-art one takes 1/2.",
  )}</p></div>`;
  return section(
    "certify",
    "Certified accuracy",
    [how, ...notes.map((n) => warning(n)), chart, ...tables].join("\n"),
  );
}
