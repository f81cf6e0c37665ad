import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildReport, loadRun } from "../../src/report/index.ts";
import { convergenceOf } from "../../src/report/data.ts";
import { FIXTURES } from "./helpers.ts";

// The convergence of the estimated (block and head) true values reaches the report: unconverged
// estimates are counted beside the bounds-against-truth tables and their layers marked.

/** The bounds section of a report. */
function bounds(html: string): string {
  const m = /<section id="bounds">[\s\S]*?<\/section>/.exec(html);
  assert.ok(m !== null, "a bounds section");
  return m[0];
}

/** The parts of analysis.json these tests change. */
interface Doc {
  layers: Record<
    string,
    { true?: (number | null)[]; converged?: (boolean | null)[]; heads?: unknown[] }
  >;
  convergence?: unknown;
}

/** A run folder holding the minimal fixture's analysis.json changed by `edit`. */
function runWith(edit: (doc: Doc) => void): string {
  const doc = JSON.parse(readFileSync(join(FIXTURES.minimal, "analysis.json"), "utf8"));
  edit(doc);
  const dir = mkdtempSync(join(tmpdir(), "attnlip-convergence-"));
  writeFileSync(join(dir, "analysis.json"), JSON.stringify(doc));
  return dir;
}

test("convergenceOf counts estimates per block layer, unconverged ones and ones without a record", async () => {
  const jasmin = convergenceOf(await loadRun(FIXTURES.jasmin));
  assert.deepEqual(
    jasmin.layers.map((l) => [l.layer, l.block.estimates, l.block.unconverged, l.heads.estimates]),
    [
      ["block.0", 3, 1, 0],
      ["block.1", 3, 0, 0],
    ],
  );
  assert.deepEqual(jasmin.total, { estimates: 6, unconverged: 1, unrecorded: 0 });
  assert.deepEqual(
    [jasmin.method, jasmin.tolerance, jasmin.maxIterations],
    ["lanczos", 1e-6, 1000],
  );
  // An older analysis.json: true values but no `converged` arrays.
  const baseline = convergenceOf(await loadRun(FIXTURES.baseline));
  assert.deepEqual(baseline.total, { estimates: 6, unconverged: 0, unrecorded: 6 });
  assert.equal(baseline.method, null);
  // No estimated true value at all (the network's is exact and not counted).
  assert.deepEqual(convergenceOf(await loadRun(FIXTURES.minimal)).total, {
    estimates: 0,
    unconverged: 0,
    unrecorded: 0,
  });
});

test("the report warns about unconverged true values, counts them and marks their layer", async () => {
  const html = bounds(await buildReport([{ dir: FIXTURES.jasmin, name: "JaSMin" }]));
  assert.match(
    html,
    /<p class="warn">Warning: 1 of 6 true values of blocks and heads did not converge \(1 of 6 block, 0 of 0 head estimates; lanczos, residual tolerance 1e-6, cap 1000 products\)/,
  );
  // block.0's true value carries the mark, block.1's does not.
  assert.match(
    html,
    /<th scope="row">true<\/th><td class="num">[^<]*<small>[^<]*<\/small> <span class="warn" title="1 of 3 estimates did not converge">\* 1\/3<\/span><\/td><td class="num">[^<]*<small>[^<]*<\/small><\/td>/,
  );
  assert.match(html, /the black curve may lie low there/);
});

test("converged, head records, and older files without records are each said plainly", async () => {
  const converged = runWith((doc) => {
    doc.layers["block.0"].true = [5, 6];
    doc.layers["block.0"].converged = [true, true];
    doc.layers["block.0"].heads = [
      { head: 0, true: [1, 2], converged: [true, false] },
      { head: 1, true: [null, null], converged: [null, null] },
    ];
    doc.convergence = { method: "lanczos", tolerance: 1e-6, maxIterations: 1000 };
  });
  const one = bounds(await buildReport([{ dir: converged }]));
  assert.match(
    one,
    /1 of 4 true values of blocks and heads did not converge \(0 of 2 block, 1 of 2 head estimates/,
  );
  assert.doesNotMatch(
    one,
    /title="[^"]*did not converge"/,
    "no block value is marked: only a head failed",
  );
  const all = runWith((doc) => {
    doc.layers["block.0"].true = [5, 6];
    doc.layers["block.0"].converged = [true, true];
    doc.convergence = { method: "lanczos", tolerance: 1e-6, maxIterations: 1000 };
  });
  const ok = bounds(await buildReport([{ dir: all }]));
  assert.doesNotMatch(ok, /class="warn"/);
  assert.match(
    ok,
    /True values of blocks and heads: 2 estimates from below \(lanczos, residual tolerance 1e-6, cap 1000 products\); 2 converged\./,
  );
  const old = runWith((doc) => (doc.layers["block.0"].true = [5, 6]));
  const oldHtml = bounds(await buildReport([{ dir: old }]));
  assert.doesNotMatch(oldHtml, /class="warn"/);
  assert.match(
    oldHtml,
    /2 of them have no convergence record \(analysis\.json from an older attnlip\)/,
  );
  // Nothing estimated: no note at all.
  const none = bounds(await buildReport([{ dir: FIXTURES.minimal }]));
  assert.doesNotMatch(none, /class="(warn|convergence)"|estimates from below/);
});
