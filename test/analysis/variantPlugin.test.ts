// A toy bound variant registered from outside, through the library's public registration
// (registerBoundVariant, as docs/design.md's recipe says), with no other file changed: it is
// computed by default, checked against the built-in it doubles, written to analysis.json, shown
// in the CLI's table, the report's legend table and its chart legend with its own colour, and the
// explorer's bounds table. Built-ins keep their order and colours.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  EXTRA_COLOURS,
  HEAD_VARIANTS,
  attentionHeadBounds,
  boundVariants,
  checkVariants,
  defaultVariants,
  headWeightNorms,
  l2HeadBounds,
  l2HeadWeights,
  registerBoundVariant,
  unregisterBoundVariant,
  variantColours,
  variantNames,
  type DotBoundVariant,
  type L2BoundVariant,
} from "../../src/index.ts";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { analyze } from "../../src/analysis/analyze.ts";
import { writeAnalysis } from "../../src/analysis/files.ts";
import { analysisTables } from "../../src/analysis/table.ts";
import { buildReport } from "../../src/report/index.ts";
import { inspect } from "../../src/explorer/compute.ts";
import { boundsTable } from "../../src/explorer/boundsTable.ts";
import { chartsOf } from "../report/helpers.ts";
import { mulberry32, normals } from "../lipschitz/rulesHelpers.ts";

await useBackend("wasm");

/** Twice `cov`: a valid (loose) bound that needs the costly exact query path. */
const TWICE_COV: DotBoundVariant = {
  name: "twice-cov",
  kind: "dot",
  family: "prior art",
  note: "a toy: twice cov (registered by test/analysis/variantPlugin.test.ts)",
  math: "2. One attention head",
  needs: ["queryPathExact"],
  compute: (q) => 2 * (q.valuePath + q.queryPathExact + q.keyPath),
};

/** Twice `l2-dist`, for L2 attention. */
const TWICE_L2: L2BoundVariant = {
  name: "twice-l2-dist",
  kind: "l2",
  family: "distribution-aware",
  note: "a toy: twice l2-dist",
  math: "Local bounds of L2 attention",
  needs: [],
  compute: (q) => 2 * (q.valuePath + q.queryDist + q.keyDist),
  dotRefusal: "twice-l2-dist bounds L2 attention only (a toy)",
};

const builtins = variantNames();
const builtinColours = variantColours(builtins);
const toy = registerBoundVariant(TWICE_COV);
registerBoundVariant(TWICE_L2);
const dir = mkdtempSync(join(tmpdir(), "attnlip-variant-plugin-"));
after(() => {
  unregisterBoundVariant(TWICE_COV.name);
  unregisterBoundVariant(TWICE_L2.name);
  rmSync(dir, { recursive: true, force: true });
});

test("registration: listed after the built-ins, its own colour (not black, not a built-in's); bad records are refused", () => {
  assert.deepEqual(variantNames(), [...builtins, "twice-cov", "twice-l2-dist"]);
  assert.deepEqual(defaultVariants(false), [...HEAD_VARIANTS, "twice-cov"]);
  assert.deepEqual(variantNames("l2"), ["l2-dist", "l2-cov", "kim", "twice-l2-dist"]);
  assert.deepEqual(checkVariants(["twice-cov", "paper"], "me"), ["paper", "twice-cov"]);
  // Built-ins keep their colours; the toy gets the first unused one of EXTRA_COLOURS.
  assert.deepEqual(variantColours(builtins), builtinColours);
  assert.equal(builtinColours.length, 13);
  assert.equal(new Set(builtinColours).size, 13);
  assert.equal(toy.colour, EXTRA_COLOURS[0]);
  assert.ok(!builtinColours.includes(toy.colour) && toy.colour !== "black");
  assert.equal(boundVariants("l2").at(-1)!.colour, EXTRA_COLOURS[1]);
  // A name no registry knows (an analysis.json from elsewhere) gets a colour no other series has.
  const shown = variantColours(["paper", "elsewhere", "twice-cov"]);
  assert.equal(new Set(shown).size, 3);
  assert.throws(() => registerBoundVariant(TWICE_COV), /already registered/);
  assert.throws(() => registerBoundVariant({ ...TWICE_COV, name: "true" }), /reserved/);
  assert.throws(() => registerBoundVariant({ ...TWICE_COV, name: "Twice Cov" }), /lower-case/);
  assert.throws(
    () => registerBoundVariant({ ...TWICE_COV, name: "odd", family: "new" as never }),
    /odd: family must be "distribution-aware", "prior art" or "paper", got "new"/,
  );
  assert.throws(
    () => registerBoundVariant({ ...TWICE_L2, name: "mute", dotRefusal: "" }),
    /mute: a variant of L2 attention needs dotRefusal/,
  );
  assert.throws(
    () => registerBoundVariant({ ...TWICE_COV, name: "dark", colour: "#000000" }),
    /black is the true value's colour/,
  );
  assert.throws(
    () => registerBoundVariant({ ...TWICE_COV, name: "needy", needs: ["rowExact" as never] }),
    /unknown need "rowExact" \(known for kind dot: inputNorms, queryPathExact, fusedPaths\)/,
  );
  assert.throws(
    () => checkVariants(["nothing"], "me"),
    /me: variants: unknown variant "nothing" \(known: paper, .*, twice-cov, twice-l2-dist\)/,
  );
});

test("a head: the toy is twice cov, also when asked alone (its need computes the exact query path); an L2 toy is twice l2-dist, and dot-product heads refuse it with its reason", () => {
  const rand = mulberry32(5);
  const n = 6;
  const d = 4;
  const dk = 2;
  const w = {
    d,
    dk,
    wq: normals(rand, d * dk),
    wk: normals(rand, d * dk),
    wv: normals(rand, d * dk),
  };
  const p = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    const e = Array.from({ length: n }, () => Math.exp(2 * normals(rand, 1)[0]));
    const z = e.reduce((a, b) => a + b, 0);
    e.forEach((v, j) => (p[i * n + j] = v / z));
  }
  const act = {
    n,
    x: normals(rand, n * d),
    q: normals(rand, n * dk),
    k: normals(rand, n * dk),
    v: normals(rand, n * dk),
    p,
  };
  const norms = headWeightNorms(w);
  const all = attentionHeadBounds(act, norms);
  assert.deepEqual(Object.keys(all.values), [...HEAD_VARIANTS, "twice-cov"]);
  assert.equal(all.values["twice-cov"], 2 * all.values.cov);
  const alone = attentionHeadBounds(act, norms, { variants: ["twice-cov"] });
  assert.deepEqual(Object.keys(alone.values), ["twice-cov"]);
  assert.equal(alone.values["twice-cov"], 2 * all.values.cov);
  assert.throws(
    () => attentionHeadBounds(act, norms, { variants: ["twice-l2-dist"] }),
    /attention head: twice-l2-dist bounds L2 attention only \(a toy\)/,
  );
  const l2 = l2HeadBounds({ n, q: act.q, p }, l2HeadWeights(w.wq, w.wv, d, dk));
  assert.deepEqual(Object.keys(l2.values), ["l2-dist", "l2-cov", "twice-l2-dist"]);
  assert.equal(l2.values["twice-l2-dist"], 2 * l2.values["l2-dist"]!);
});

const model = createModel("vit-micro", 1) as TransformerClassifier;
after(() => model.dispose());
const pixels = Float32Array.from({ length: 28 * 28 }, (_, i) => ((i * 37) % 101) / 100);

test("analyze, analysis.json and the CLI table: the toy's column beside the built-ins, twice cov per head", async () => {
  const x = tf.tensor4d(
    Float32Array.from([...pixels, ...pixels.map((v) => 1 - v)]),
    [2, 28, 28, 1],
  );
  const a = analyze(model, x, { truth: { heads: false }, maxIterations: 200 });
  x.dispose();
  assert.deepEqual(a.variants, [...HEAD_VARIANTS, "twice-cov"]);
  for (const head of a.blocks[0].heads)
    assert.deepEqual(
      head.bounds["twice-cov"],
      head.bounds.cov.map((v) => 2 * v),
    );
  for (let e = 0; e < 2; e++) {
    assert.ok(a.network.bounds["twice-cov"][e] > a.network.bounds.cov[e]);
    assert.ok(a.network.bounds["twice-cov"][e] >= a.network.true[e]);
  }
  await writeAnalysis(dir, a, { model: model.config });
  const doc = JSON.parse(readFileSync(join(dir, "analysis.json"), "utf8"));
  assert.deepEqual(doc.variants, [...HEAD_VARIANTS, "twice-cov"]);
  assert.equal(doc.layers.network["twice-cov"].length, 2);
  assert.equal(doc.layers["block.0"]["twice-cov"].length, 2);
  const printed = analysisTables(a);
  // One row per table (block.0, network), with its bound.
  assert.equal(printed.match(/^│ twice-cov +│ [\d.e+-]+ +│/gm)?.length, 2);

  // The report: the legend table's line is the record's note, and the bounds chart's legend
  // draws the toy in its own colour.
  const html = await buildReport([{ dir }]);
  assert.ok(
    html.includes(`<tr><th scope="row">twice-cov</th><td>${TWICE_COV.note}</td></tr>`),
    "legend table line",
  );
  const chart = chartsOf(html).find((c) => c.id === "bounds");
  assert.ok(chart !== undefined && chart.svg.includes(">twice-cov<"), "chart legend label");
  assert.ok(chart.svg.includes(toy.colour), `the toy's colour ${toy.colour} in the chart`);
});

test("the explorer: the toy's column in the bounds table", () => {
  const r = inspect(model, pixels);
  assert.deepEqual(Object.keys(r.layers[0].bounds), [...HEAD_VARIANTS, "twice-cov"]);
  const html = boundsTable(r);
  assert.ok(html.includes("<th>twice-cov</th>"));
  const cells = [...html.matchAll(/data-variant="twice-cov" data-bound="([^"]+)"/g)].map((m) =>
    Number(m[1]),
  );
  assert.equal(cells.length, r.layers.length);
  r.layers.forEach((l, i) => assert.equal(cells[i], l.bounds["twice-cov"]));
});
