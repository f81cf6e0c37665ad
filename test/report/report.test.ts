import { before, test } from "node:test";
import assert from "node:assert/strict";
import {
  cpSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
  mkdirSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildReport, loadRun, writeReport } from "../../src/report/index.ts";
import { InputError } from "../../src/util/errors.ts";
import { formatNumber } from "../../src/report/html.ts";
import { histogram, layerOrder, poolMap, subsample } from "../../src/report/data.ts";
import { chartsOf, FIXTURES, markCount } from "./helpers.ts";

let both = "";
before(async () => {
  both = await buildReport(
    [
      { dir: FIXTURES.baseline, name: "baseline" },
      { dir: FIXTURES.jasmin, name: "JaSMin" },
    ],
    { title: "Baseline vs JaSMin <test>" },
  );
});

test("the report is self-contained: no URLs, no scripts, no external resources", () => {
  assert.match(both, /^<!DOCTYPE html>/);
  assert.doesNotMatch(both, /https?:\/\//i, "no http:// or https:// anywhere");
  assert.doesNotMatch(both, /<script/i);
  assert.doesNotMatch(both, /<link\b/i);
  assert.doesNotMatch(both, /<(img|iframe|object|embed)\b/i);
  assert.doesNotMatch(both, /\bsrc\s*=/i);
  for (const m of both.matchAll(/url\(([^)]*)\)/g))
    assert.ok(m[1].startsWith("#"), `url(${m[1]}) is not an in-page reference`);
  const ids = [...both.matchAll(/\bid="([^"]+)"/g)].map((m) => m[1]);
  assert.equal(new Set(ids).size, ids.length, "element ids are unique in the page");
  assert.doesNotMatch(both, /@import/i);
  for (const m of both.matchAll(/\bhref\s*=\s*"([^"]*)"/g))
    assert.ok(m[1].startsWith("#"), `href ${m[1]} is not an in-page anchor`);
  assert.match(both, /<style>/);
});

test("every chart is an inline <svg> with drawn marks", () => {
  const charts = chartsOf(both);
  assert.deepEqual(
    charts.map((c) => c.id),
    [
      "sigma-scatter",
      "distributions",
      "bounds",
      "robustness",
      "attention-maps-0",
      "attention-maps-1",
      "training",
    ],
  );
  for (const c of charts) {
    assert.match(c.svg, /^<svg class="marks" width="\d+" height="\d+"/, c.id);
    assert.ok(markCount(c.svg) > 0, `${c.id}: no drawn marks`);
  }
  const scatter = charts.find((c) => c.id === "sigma-scatter")!;
  // 40 rows per run plus the two envelope lines.
  assert.equal(markCount(scatter.svg), 2 * 40 + 2);
  const maps = charts.find((c) => c.id === "attention-maps-0")!;
  assert.equal(markCount(maps.svg), 2 * 2 * 4 * 4, "2 blocks x 2 heads x 4 x 4 cells");
});

test("headline, how-to-read paragraph and the title are there, escaped", () => {
  assert.match(both, /<title>Baseline vs JaSMin &lt;test&gt;<\/title>/);
  assert.match(both, /<h1>Baseline vs JaSMin &lt;test&gt;<\/h1>/);
  assert.match(both, /<strong>baseline<\/strong>/);
  assert.match(both, /<strong>JaSMin<\/strong>/);
  assert.match(both, /How to read this report/);
  assert.match(both, /tighter/);
});

test("tables hold every variant's median per layer, true values, ratios, accuracies and settings", () => {
  const analysis = JSON.parse(readFileSync(join(FIXTURES.baseline, "analysis.json"), "utf8"));
  const values = [...analysis.layers["block.1"]["t3-exact"]].sort((a: number, b: number) => a - b);
  assert.ok(both.includes(`>${formatNumber(values[1])} <small>`), "median of t3-exact at block.1");
  const truth = [...analysis.layers.network.true].sort((a: number, b: number) => a - b);
  assert.ok(
    both.includes(`>${formatNumber(truth[1])} <small>`),
    "median true value of the network",
  );
  assert.match(both, /Median bound\/true per layer/);
  const attack = JSON.parse(readFileSync(join(FIXTURES.jasmin, "attack.json"), "utf8"));
  assert.ok(
    both.includes(`${(100 * attack.results[2].pgd).toFixed(1)}%`),
    "robust accuracy at eps 0.2",
  );
  assert.ok(both.includes(`${(100 * attack.cleanAccuracy).toFixed(1)}%`));
  assert.match(
    both,
    /training: jasmin\.lambda<\/th><td class="num">0<\/td><td class="num">0\.01<\/td>/,
  );
  assert.match(both, /model: dModel/);
  assert.doesNotMatch(both, /Not available/);
});

test("a run folder with only analysis.json: every optional section says not available", async () => {
  const html = await buildReport([{ dir: FIXTURES.minimal }]);
  assert.match(html, /<h1>attnlip report: minimal<\/h1>/);
  for (const what of [
    "no attention rows",
    "no attack.json",
    "no attention maps",
    "no metrics.jsonl",
    "no train_state.json",
  ])
    assert.ok(html.includes(`Not available: ${what}`), what);
  const charts = chartsOf(html);
  assert.deepEqual(
    charts.map((c) => c.id),
    ["bounds"],
  );
  assert.ok(markCount(charts[0].svg) > 0);
  assert.doesNotMatch(html, /https?:\/\//);
});

test("two runs where one lacks attack.json and metrics.jsonl: that run is named as not available", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-"));
  cpSync(FIXTURES.jasmin, join(dir, "jasmin"), { recursive: true });
  rmSync(join(dir, "jasmin", "attack.json"));
  rmSync(join(dir, "jasmin", "metrics.jsonl"));
  rmSync(join(dir, "jasmin", "train_state.json"));
  const html = await buildReport([{ dir: FIXTURES.baseline }, { dir: join(dir, "jasmin") }]);
  assert.match(html, /Not available: jasmin: no attack\.json/);
  assert.match(html, /Not available: jasmin: no metrics\.jsonl/);
  const ids = chartsOf(html).map((c) => c.id);
  assert.ok(ids.includes("robustness") && ids.includes("training"));
  rmSync(dir, { recursive: true });
});

test("two runs attacked differently are refused on one chart unless allowMixed, which lists the differences", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-mixed-"));
  cpSync(FIXTURES.jasmin, join(dir, "jasmin"), { recursive: true });
  const path = join(dir, "jasmin", "attack.json");
  const attack = JSON.parse(readFileSync(path, "utf8"));
  attack.n = attack.n + 16;
  attack.results = attack.results.slice(0, -1);
  writeFileSync(path, JSON.stringify(attack));
  const runs = [{ dir: FIXTURES.baseline }, { dir: join(dir, "jasmin") }];
  await assert.rejects(buildReport(runs), (e: Error) => {
    assert.ok(e instanceof InputError);
    assert.match(e.message, /^report: the two runs were attacked differently \(eps: .* vs .*; inputs: \d+ vs \d+\), so one chart would mix them; attack them alike, or give --allow-mixed/);
    return true;
  });
  const html = await buildReport(runs, { allowMixed: true });
  assert.match(html, /these runs were attacked differently \(drawn together with --allow-mixed\): eps: .*; inputs: \d+ vs \d+/);
  rmSync(dir, { recursive: true });
});

test("analysis.json in an analysis/ subfolder is found; names default to the run folder", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-"));
  mkdirSync(join(dir, "runA", "analysis"), { recursive: true });
  cpSync(join(FIXTURES.minimal, "analysis.json"), join(dir, "runA", "analysis", "analysis.json"));
  const run = await loadRun(join(dir, "runA"));
  assert.equal(run.name, "runA");
  assert.equal(run.files.analysis, join(dir, "runA", "analysis", "analysis.json"));
  assert.equal(run.attack, null);
  const html = await buildReport([
    { dir: join(dir, "runA", "analysis") },
    { dir: join(dir, "runA") },
  ]);
  assert.match(html, /<h1>attnlip report: runA vs runA \(2\)<\/h1>/);
  rmSync(dir, { recursive: true });
});

test("loadRun: clear InputErrors naming the folder or file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-"));
  const reject = (d: string, re: RegExp) =>
    assert.rejects(
      loadRun(d),
      (e: unknown) => e instanceof InputError && re.test((e as Error).message),
    );
  await reject(join(dir, "missing"), /run folder .*missing does not exist/);
  writeFileSync(join(dir, "file"), "x");
  await reject(join(dir, "file"), /is not a folder/);
  mkdirSync(join(dir, "empty"));
  await reject(join(dir, "empty"), /holds no analysis\.json/);

  const make = (name: string, files: Record<string, string>) => {
    mkdirSync(join(dir, name));
    cpSync(join(FIXTURES.minimal, "analysis.json"), join(dir, name, "analysis.json"));
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, name, f), text);
    return join(dir, name);
  };
  await reject(
    make("badjson", { "analysis.json": '{"variants": [' }),
    /badjson\/analysis\.json: invalid JSON/,
  );
  await reject(
    make("noLayers", { "analysis.json": '{"variants": ["a"]}' }),
    /analysis\.json: layers: /,
  );
  await reject(
    make("badVariant", {
      "analysis.json": '{"variants": ["a"], "layers": {"network": {"a": "x"}}}',
    }),
    /analysis\.json: layers\.network\.a: expected an array of numbers/,
  );
  await reject(
    make("badMaps", {
      "analysis.json":
        '{"variants": ["a"], "layers": {"network": {"a": [1]}}, "attentionMaps": {"n": 3, "maps": [[[0.5, 0.5]]]}}',
    }),
    /attentionMaps\.maps\.0\.0: expected 3x3 = 9 values, got 2/,
  );
  await reject(
    make("badAttack", { "attack.json": "{not json" }),
    /badAttack\/attack\.json: invalid JSON/,
  );
  await reject(
    make("badNorm", { "attack.json": '{"norm": "l3", "results": []}' }),
    /attack\.json: norm: /,
  );
  await reject(
    make("badMetrics", { "metrics.jsonl": '{"epoch": 1}\n{"epoch": 2\n' }),
    /metrics\.jsonl line 2: invalid JSON/,
  );
  await reject(
    make("badMetricField", { "metrics.jsonl": '{"epoch": "one"}\n' }),
    /metrics\.jsonl line 1: epoch: /,
  );
  await reject(make("badConfig", { "config.json": "[1, 2" }), /config\.json: invalid JSON/);
  await reject(make("badState", { "train_state.json": "42" }), /train_state\.json: \(root\): /);
  await assert.rejects(buildReport([]), InputError);
  await assert.rejects(buildReport([{ dir }, { dir }, { dir }]), /one or two run folders, got 3/);
  rmSync(dir, { recursive: true });
});

test("writeReport writes atomically, leaving no temporary file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-"));
  const path = join(dir, "sub", "report.html");
  await writeReport(path, both);
  assert.equal(readFileSync(path, "utf8"), both);
  assert.deepEqual(readdirSync(join(dir, "sub")), ["report.html"]);
  rmSync(dir, { recursive: true });
});

test("data helpers: layer order, histogram fractions, subsampling, pooling", () => {
  assert.deepEqual(layerOrder(["network", "block.10", "block.2", "embed"]), [
    "block.2",
    "block.10",
    "embed",
    "network",
  ]);
  const bins = histogram([0, 0.1, 0.5, 1, 1], 0, 1, 4);
  assert.deepEqual(
    bins.map((b) => b.fraction),
    [0.4, 0, 0.2, 0.4],
  );
  assert.ok(
    Math.abs(histogram([0.3, 0.2, 0.9], 0, 1, 7).reduce((s, b) => s + b.fraction, 0) - 1) < 1e-12,
  );
  assert.deepEqual(subsample([1, 2, 3, 4, 5, 6], 3), [1, 3, 5]);
  assert.deepEqual(subsample([1, 2], 3), [1, 2]);
  const pooled = poolMap([1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 4, 2);
  assert.equal(pooled.size, 2);
  assert.deepEqual(pooled.cells, [0.25, 0.25, 0, 0]);
});

test("the network's composition floor is a row of the bounds table when analysis.json has it, and absent for older files", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-floor-"));
  const analysis = JSON.parse(readFileSync(join(FIXTURES.minimal, "analysis.json"), "utf8"));
  analysis.layers.network.compositionFloor = (analysis.layers.network.true as unknown[]).map((_, i) => 1234.5 + i);
  mkdirSync(join(dir, "run"));
  writeFileSync(join(dir, "run", "analysis.json"), JSON.stringify(analysis));
  const html = await buildReport([{ dir: join(dir, "run") }]);
  // A row of the per-run table: empty under the blocks, the median (q1-q3) under the network.
  assert.match(html, /<th scope="row">composition floor<\/th><td><\/td><td class="num">\d+/);
  assert.match(html, /<th scope="row">composition floor<\/th><td>network only:/, "the legend explains it");
  const older = await buildReport([{ dir: FIXTURES.minimal }]);
  assert.doesNotMatch(older, /composition floor/);
  rmSync(dir, { recursive: true });
});

test("the bounds chart draws blocks as lines and the network in a panel of its own (no line joins them), the composition floor as a marker, and each variant family with its own dash and shape", async () => {
  const { boundsSpec, variantFamily } = await import("../../src/report/charts.ts");
  const points = ["block.0", "block.1", "network"].flatMap((layer, i) =>
    ["t3-half", "cov", "paper", "true", ...(layer === "network" ? ["composition floor"] : [])].map((series, k) => ({
      run: "a", layer, series, median: 10 ** (i + k), q1: 1, q3: 1,
    })),
  );
  const spec = boundsSpec(points, ["a"], ["block.0", "block.1", "network"], ["t3-half", "cov", "paper"]) as unknown as {
    vconcat: { hconcat: { data: { values: { layer: string }[] }; layer: { mark: { type: string } }[] }[] }[];
  };
  const [blocks, network] = spec.vconcat[0].hconcat;
  assert.ok(blocks.data.values.every((p) => p.layer !== "network"));
  assert.ok(network.data.values.every((p) => p.layer === "network"));
  assert.ok(network.layer.every((l) => l.mark.type === "point"), "no line in the network panel");
  const json = JSON.stringify(spec);
  assert.match(json, /"composition floor"\]/);
  assert.deepEqual(["t3-half", "cov", "paper", "true"].map(variantFamily), ["prior art", "distribution-aware", "paper", "truth"]);
  const svg = await (await import("../../src/report/render.ts")).renderVegaLite(spec as never);
  assert.doesNotMatch(svg, /…/, "no legend label is cut");
});

test("the Lipschitz proxy radius is a result with its own table (norm, unit, 'a proxy, not a certificate'), not a row of the attack settings", async () => {
  const html = await buildReport([{ dir: FIXTURES.baseline, name: "baseline" }]);
  const settings = html.slice(html.indexOf("<caption>Attack settings</caption>"));
  assert.doesNotMatch(settings.slice(0, settings.indexOf("</table>")), /proxy/);
  assert.match(html, /<caption>Lipschitz proxy radius: margin \/ \(sqrt 2 · L\), an l2 radius in pixel units, .*a proxy, not a certificate/);
  assert.match(html, /<th scope="row">misclassified \(radius 0\)<\/th>/);
});

test("the attention maps show the input they belong to: the image beside them, or the text's tokens with their positions", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-input-"));
  const analysis = JSON.parse(readFileSync(join(FIXTURES.baseline, "analysis.json"), "utf8"));
  mkdirSync(join(dir, "image"));
  writeFileSync(join(dir, "image", "analysis.json"), JSON.stringify({ ...analysis, firstInput: { kind: "image", height: 4, width: 4, channels: 1, pixels: Array.from({ length: 16 }, (_, i) => i / 15) } }));
  const image = await buildReport([{ dir: join(dir, "image") }]);
  assert.match(image, /data-chart="attention-input-0"/);
  assert.match(image, /the input these maps are of \(4 x 4\)/);
  mkdirSync(join(dir, "text"));
  writeFileSync(join(dir, "text", "analysis.json"), JSON.stringify({ ...analysis, firstInput: { kind: "text", tokens: ["[CLS]", "free", "<money>", "[PAD]"], real: 3 } }));
  const text = await buildReport([{ dir: join(dir, "text") }]);
  assert.match(text, /\(3 real tokens, then 1 padding positions\), position: token: <code>0:\[CLS\]<\/code> <code>1:free<\/code> <code>2:&lt;money&gt;<\/code><\/p>/);
  rmSync(dir, { recursive: true });
});
