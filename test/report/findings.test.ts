// The report's top box says what THESE runs found, in words computed from their files (which
// run has the lower true network Lipschitz constant and by how much, robust accuracy up or down
// per radius), and only their settings; another experiment's note (the demo's committed study)
// stands in a section of its own after the runs' sections. Tables wrap instead of running
// wider than the page; the bounds chart keeps equal medians apart.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { median } from "simple-statistics";
import { buildReport, loadRun } from "../../src/report/index.ts";
import { findingsOf } from "../../src/report/findings.ts";
import { boundsSpec } from "../../src/report/charts.ts";
import { FIXTURES } from "./helpers.ts";

const json = (path: string) => JSON.parse(readFileSync(path, "utf8"));
const networkTrue = (dir: string) =>
  median(json(join(dir, "analysis.json")).layers.network.true as number[]);
const percent = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The top box of a report: the findings div. */
const topBox = (html: string) => /<div class="howto findings"[\s\S]*?<\/div>/.exec(html)?.[0] ?? "";

test("the top box names the run with the lower true network constant, by how much, computed from analysis.json", async () => {
  const html = await buildReport([
    { dir: FIXTURES.baseline, name: "baseline" },
    { dir: FIXTURES.jasmin, name: "JaSMin (lambda 0.1)" },
  ]);
  const box = topBox(html);
  const a = networkTrue(FIXTURES.baseline); // 44.64
  const b = networkTrue(FIXTURES.jasmin); // 32.45
  assert.ok(b < a);
  assert.match(box, /What these runs found/);
  assert.ok(
    box.includes(
      `JaSMin (lambda 0.1) has the lower true network Lipschitz constant: ${Number(b.toPrecision(4))} against ${Number(a.toPrecision(4))} for baseline, ${((100 * (a - b)) / a).toFixed(1)}% lower`,
    ),
    box,
  );
  // The other way round, the other run is named.
  const swapped = findingsOf([
    await loadRun(FIXTURES.jasmin, "JaSMin"),
    await loadRun(FIXTURES.baseline, "baseline"),
  ]);
  assert.match(swapped.lines[0], /^JaSMin has the lower true network Lipschitz constant/);
});

test("the top box says per radius whether robust accuracy went up or down, from attack.json", async () => {
  const work = mkdtempSync(join(tmpdir(), "attnlip-findings-"));
  try {
    const jasmin = join(work, "jasmin");
    cpSync(FIXTURES.jasmin, jasmin, { recursive: true });
    // PGD below the baseline at eps 0.05 and 0.2, equal at 0.1, above at 0.3.
    const base = json(join(FIXTURES.baseline, "attack.json"));
    const attack = json(join(jasmin, "attack.json"));
    const pgd = [0.3, base.results[1].pgd, 0.05, 0.2];
    attack.results.forEach((r: { pgd: number }, i: number) => (r.pgd = pgd[i]));
    writeFileSync(join(jasmin, "attack.json"), JSON.stringify(attack));
    const f = findingsOf([
      await loadRun(FIXTURES.baseline, "baseline"),
      await loadRun(jasmin, "JaSMin"),
    ]);
    const line = f.lines.find((l) => l.startsWith("PGD robust accuracy"));
    assert.ok(line !== undefined, f.lines.join("\n"));
    assert.match(
      line,
      /of JaSMin against baseline: higher at 1, lower at 2, the same at 1 of 4 radii/,
    );
    const d = (i: number) => Math.abs(100 * (pgd[i] - base.results[i].pgd)).toFixed(1);
    assert.ok(
      line.includes(
        `eps 0.05: ${percent(0.3)} against ${percent(base.results[0].pgd)}, down ${d(0)} points`,
      ),
      line,
    );
    assert.ok(
      line.includes(`eps 0.1: ${percent(pgd[1])} against ${percent(pgd[1])}, the same`),
      line,
    );
    assert.ok(
      line.includes(
        `eps 0.3: ${percent(0.2)} against ${percent(base.results[3].pgd)}, up ${d(3)} points`,
      ),
      line,
    );
    // FGSM was not touched: higher at every radius, as the fixture has it.
    assert.match(
      f.lines.find((l) => l.startsWith("FGSM"))!,
      /higher at 4 of 4 radii/,
    );
    assert.match(
      f.lines.find((l) => l.startsWith("Clean accuracy"))!,
      /JaSMin 91\.0% against 93\.0% for baseline \(down 2\.0 points/,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

test("the top box holds only these runs' settings; another experiment's note stands in its own section after the runs'", async () => {
  const note = {
    heading: "What the committed study says:",
    lines: ["lambda 0.01 linf:apgd:eps=0.02, elsewhere"],
  };
  const html = await buildReport(
    [
      { dir: FIXTURES.baseline, name: "baseline" },
      { dir: FIXTURES.jasmin, name: "JaSMin" },
    ],
    { note },
  );
  const box = topBox(html);
  assert.doesNotMatch(box, /committed study|linf:apgd/);
  // Settings from these runs' files: their attack (l∞, their radii, their inputs) and training.
  const attack = json(join(FIXTURES.jasmin, "attack.json"));
  assert.ok(
    box.includes(
      `attack: PGD and FGSM, l∞, eps ${attack.results.map((r: { eps: number }) => r.eps).join(", ")}, ${attack.steps} steps, ${attack.n} inputs of mnist`,
    ),
    box,
  );
  const other = html.indexOf('<section id="other-experiment">');
  assert.ok(other > html.indexOf('<section id="configuration">'), "after the runs' sections");
  assert.ok(html.indexOf("linf:apgd:eps=0.02") > other);
  assert.match(html.slice(other), /Beside these runs: another experiment/);
  // One run: its own values, no comparison.
  const one = findingsOf([await loadRun(FIXTURES.baseline, "baseline")]);
  assert.equal(one.heading, "What this run found");
  assert.match(
    one.lines[0],
    /^true network Lipschitz constant 44\.64 \(median over 3 analysed inputs\)/,
  );
  assert.ok(
    one.lines.some((l) => /^PGD robust accuracy \(l∞\): eps 0\.05 41\.8%/.test(l)),
    one.lines.join("\n"),
  );
});

test("the report calls bound/true by that name (bigger is looser), never tightness", async () => {
  const html = await buildReport([{ dir: FIXTURES.baseline }]);
  assert.doesNotMatch(html, /tightness/i);
  assert.match(html, /Median bound\/true per layer \(q1–q3; 1 would be exact, bigger is looser\)/);
});

test("bounds chart: variants with equal medians stand at distinct x, the network panel has its axis title", () => {
  const variants = ["t3-top2", "t3-quad", "t3-exact", "dist", "t3-half"];
  const layers = ["block.0", "block.1", "network"];
  const points = layers.flatMap((layer) =>
    [...variants, "true"].map((series) => ({
      run: "a",
      layer,
      series,
      median: series === "true" ? 10 : series === "t3-half" ? 500 : 100,
      q1: 1,
      q3: 1,
    })),
  );
  const spec = boundsSpec(points, ["a"], layers, variants) as unknown as {
    vconcat: {
      hconcat: {
        data: { values: { layer: string; series: string; x: number }[] };
        encoding: { x: { field: string }; y: { title: string } };
      }[];
    }[];
  };
  const [blocks, network] = spec.vconcat[0].hconcat;
  for (const panel of [blocks, network]) {
    assert.equal(panel.encoding.x.field, "x");
    for (const layer of new Set(panel.data.values.map((p) => p.layer))) {
      const xs = panel.data.values.filter((p) => p.layer === layer).map((p) => p.x);
      assert.equal(new Set(xs).size, xs.length, `${layer}: every series at its own x`);
    }
  }
  // A block's series stay near their block (its line joins the same offset across blocks).
  for (const p of blocks.data.values)
    assert.ok(Math.abs(p.x - layers.indexOf(p.layer)) < 0.5, `${p.series} at ${p.x}`);
  assert.equal(network.encoding.y.title, "network Lipschitz constant (log scale)");
  assert.equal(blocks.encoding.y.title, "block Lipschitz constant (log scale)");
});
