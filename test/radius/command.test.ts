// `attnlip radius` end to end on the vit-micro preset (2 inputs, 3 radii, 2 lengths): the files and
// their fields, the refusal to overwrite, and one-line refusals of bad input.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAttnlipHere } from "../helpers/cli.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";

const base = ["radius", "--random-init", "--model", "vit-micro", "--n", "2"];

test("radius on vit-micro writes radius.json, radius.csv and radius.html with every field", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-radius-"));
  const args = [...base, "--radii", "1,10,100", "--lengths", "5,17", "--out", dir];
  const r = await runAttnlipHere(args);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /blocks\.0\.attn \(attention\), held-out inputs, against R/);
  assert.match(r.stdout, /growth of the median true value: against R/);
  const doc = JSON.parse(readFileSync(join(dir, "radius.json"), "utf8"));
  assert.equal(doc.command, "radius");
  assert.equal(doc.radiusMeasure, "maxTokenNorm");
  assert.deepEqual(doc.layer, { kind: "attention", name: "blocks.0.attn" });
  assert.deepEqual(doc.radii, [1, 10, 100]);
  assert.deepEqual(doc.lengths, [5, 17]);
  assert.deepEqual(doc.inputs, { heldOut: 2, constructed: 2 });
  assert.deepEqual(doc.variants, [...HEAD_VARIANTS]);
  assert.deepEqual(doc.globalBounds, []);
  // (2 held-out + 2 constructed) x (3 radii + 2 lengths), each with its true value and every variant.
  assert.equal(doc.points.length, 20);
  for (const p of doc.points) {
    assert.equal(p.trueMethod, "dense");
    assert.equal(p.trueConverged, true);
    assert.ok(p.true > 0);
    assert.ok(p.sweep === "radius" ? p.n === 17 : [5, 17].includes(p.n), `n ${p.n}`);
    for (const v of HEAD_VARIANTS)
      assert.ok(
        p.bounds[v] >= p.true * (1 - 1e-4),
        `${p.sweep} ${p.set} R ${p.radius} n ${p.n}: ${v} ${p.bounds[v]} < ${p.true}`,
      );
  }
  assert.equal(doc.summary.radius.constructed.length, 3);
  assert.ok(Number.isFinite(doc.growth.radius.constructed));
  const csv = readFileSync(join(dir, "radius.csv"), "utf8").trim().split("\n");
  assert.equal(
    csv[0],
    "sweep,set,input,radius,n,variant,bound,true,ratio,true_method,true_converged",
  );
  assert.equal(csv.length, 1 + 20 * HEAD_VARIANTS.length);
  const html = readFileSync(join(dir, "radius.html"), "utf8");
  assert.match(html, /data-chart="radius"/);
  assert.match(html, /data-chart="length"/);
  // A second run without --force refuses, in one line, and leaves the files alone.
  const again = await runAttnlipHere(args);
  assert.equal(again.code, 2);
  assert.match(again.stderr, /radius\.json exists .*--force/);
  assert.equal(again.stderr.trim().split("\n").length, 1);
  assert.ok(existsSync(join(dir, "radius.csv")));
});

const badCases: [string, string[], RegExp][] = [
  ["a negative radius", ["--radii", "-1"], /radius: --radii: must be .*got "-1"/],
  [
    "a block outside the model",
    ["--block", "99"],
    /radius: --block: must be an integer from 0 to 0 .*got "99"/,
  ],
  [
    "an unknown model",
    ["--model", "no-such-model"],
    /radius: --model: unknown model preset "no-such-model"/,
  ],
  [
    "a length above the sequence",
    ["--lengths", "18"],
    /radius: --lengths: must be at most the sequence length 17/,
  ],
  [
    "an L2 variant on dot-product attention",
    ["--variants", "kim", "--radii", "1", "--lengths", "2"],
    /radius: --variants: variant "kim" .* bounds L2 attention only/,
  ],
];

for (const [name, extra, message] of badCases)
  test(`radius refuses ${name} with one line and exit 2`, async () => {
    const r = await runAttnlipHere([...base, ...extra]);
    assert.equal(r.code, 2, r.stdout);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  });
