// Outputs of train, analyze and attack on fixed seeds stay what they were when expected.json
// was recorded (test/golden/pipeline.ts --write): a restructuring of the code must not change
// a number a user reads. Float differences up to 1e-6 relative are allowed (an operation order
// may change); estimator bookkeeping (residuals, iteration counts) may move within noise.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { GOLDEN, runPipeline } from "./pipeline.ts";

/** Keys whose values are estimator bookkeeping: compared loosely. */
const NOISY = new Set(["residual", "relativeChange"]);

function compare(got: unknown, want: unknown, path: string, diffs: string[]): void {
  if (diffs.length > 20) return;
  // The field's name, without an array index: "residual[3]" is a residual.
  const key = path.slice(path.lastIndexOf(".") + 1).replace(/\[\d+\]$/, "");
  if (typeof want === "number" && typeof got === "number") {
    if (NOISY.has(key)) return;
    if (key === "iterations" || /iterations\[\d+\]$/.test(path)) {
      if (Math.abs(got - want) > 2) diffs.push(`${path}: ${got} vs ${want}`);
      return;
    }
    const scale = Math.max(Math.abs(want), Math.abs(got));
    if (!(got === want || Math.abs(got - want) <= 1e-6 * scale + 1e-12))
      diffs.push(`${path}: ${got} vs ${want}`);
    return;
  }
  if (Array.isArray(want)) {
    if (!Array.isArray(got) || got.length !== want.length) {
      diffs.push(
        `${path}: array of ${Array.isArray(got) ? got.length : typeof got} vs ${want.length}`,
      );
      return;
    }
    want.forEach((w, i) => compare(got[i], w, `${path}[${i}]`, diffs));
    return;
  }
  if (want !== null && typeof want === "object") {
    if (got === null || typeof got !== "object") {
      diffs.push(`${path}: ${JSON.stringify(got)} vs an object`);
      return;
    }
    const wk = Object.keys(want).sort();
    const gk = Object.keys(got).sort();
    const missing = wk.filter((k) => !gk.includes(k));
    const extra = gk.filter((k) => !wk.includes(k));
    if (missing.length + extra.length > 0)
      diffs.push(
        `${path}: keys missing ${missing.join(",") || "-"}, new ${extra.join(",") || "-"}`,
      );
    for (const k of wk)
      if (k in (got as object))
        compare(
          (got as Record<string, unknown>)[k],
          (want as Record<string, unknown>)[k],
          `${path}.${k}`,
          diffs,
        );
    return;
  }
  if (got !== want) diffs.push(`${path}: ${JSON.stringify(got)} vs ${JSON.stringify(want)}`);
}

test("train, analyze and attack give the recorded outputs on fixed seeds (image and text)", async () => {
  const want = JSON.parse(readFileSync(GOLDEN, "utf8"));
  const got = await runPipeline();
  const diffs: string[] = [];
  compare(got, want, "$", diffs);
  assert.deepEqual(diffs, [], "outputs differ from test/golden/expected.json");
});

test("the comparison notices a changed number, a missing key and a changed string", () => {
  const diffs: string[] = [];
  compare(
    { a: 1.001, b: [1, 2], c: "x", iterations: 10 },
    { a: 1, b: [1, 2], c: "y", d: 0, iterations: 11 },
    "$",
    diffs,
  );
  assert.deepEqual(diffs, ["$: keys missing d, new -", "$.a: 1.001 vs 1", '$.c: "x" vs "y"']);
});
