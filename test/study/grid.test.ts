import { test } from "node:test";
import assert from "node:assert/strict";
import { expandGrid, parseShard, parseStudyGrid, shardRuns } from "../../src/study/grid.ts";

test("the grid expands in axis order with unique folder names, and defaults fill every setting", () => {
  const grid = parseStudyGrid({ data: ["mnist", "spam"], model: ["vit-micro"], lambdas: [0, 0.1, 1], seeds: [0, 1] }, "t");
  assert.equal(grid.train.epochs, 2);
  assert.deepEqual(grid.attack.attacks, ["apgd"]);
  assert.equal(grid.attack.linf, null);
  const runs = expandGrid(grid);
  assert.equal(runs.length, 12);
  assert.equal(new Set(runs.map((r) => r.id)).size, 12);
  assert.equal(runs[0].id, "mnist_vit-micro_lambda0_top2_max-log_seed0");
  assert.equal(runs[1].id, "mnist_vit-micro_lambda0_top2_max-log_seed1");
  assert.equal(runs[6].data, "spam");
  assert.deepEqual(runs.map((r) => r.index), [...runs.keys()]);
});

test("grids are compared field by field, axes as sets: the first difference is named with its flag", async () => {
  const { gridDifference, mergeGridInput } = await import("../../src/study/grid.ts");
  const a = parseStudyGrid({ seeds: [2, 0, 1], attack: { steps: 20 } }, "t");
  assert.deepEqual(a.seeds, [0, 1, 2]);
  assert.equal(gridDifference(a, parseStudyGrid(mergeGridInput(a, { seeds: [1, 2, 0] }), "t")), null);
  assert.equal(gridDifference(a, parseStudyGrid(mergeGridInput(a, { attack: { steps: 10 } }), "t")), "attack.steps (--steps): 20 there, 10 here");
  assert.equal(gridDifference(a, parseStudyGrid(mergeGridInput(a, { model: ["vit-micro"] }), "t")), 'model (--model): ["vit-tiny"] there, ["vit-micro"] here');
  assert.deepEqual(mergeGridInput({ attack: { n: 500, steps: 20 } }, { attack: { steps: 10 } }), { attack: { n: 500, steps: 10 } });
});

test("shards k/n cover the grid exactly once for every n, and bad shards are refused", () => {
  const runs = expandGrid(parseStudyGrid({ lambdas: [0, 0.01, 0.1, 1], seeds: [0, 1, 2] }, "t"));
  for (let n = 1; n <= 13; n++) {
    const seen = Array.from({ length: n }, (_, k) => shardRuns(runs, k + 1, n)).flat().map((r) => r.id);
    assert.equal(seen.length, runs.length, `n = ${n}`);
    assert.deepEqual([...seen].sort(), runs.map((r) => r.id).sort(), `n = ${n}`);
  }
  assert.deepEqual(parseShard(" 3 / 8 "), { k: 3, n: 8 });
  for (const bad of ["0/4", "5/4", "a/b", "1", "1/0", "-1/2", "1.5/3"])
    assert.throws(() => parseShard(bad), new RegExp(`study: --shard: must be k/n with 1 <= k <= n .*got "${bad.replace(/[.+/]/g, "\\$&")}"`));
});

test("a bad grid is refused naming the field: unknown attack, repeated value, wrong type, unknown field", () => {
  assert.throws(() => parseStudyGrid({ attack: { attacks: ["cw"] } }, "study"), /study: attack\.attacks \(--attack\): unknown attack "cw" \(expected one of .*apgd/);
  assert.throws(() => parseStudyGrid({ seeds: [0, 0] }, "study"), /study: seeds \(--seeds\): 0 is listed twice/);
  assert.throws(() => parseStudyGrid({ attack: { linf: [0.05, 0.05] } }, "study"), /study: attack\.linf \(--eps-linf\): 0\.05 is listed twice/);
  assert.throws(() => parseStudyGrid({ lambdas: [-1] }, "study"), /study: lambdas\.0 \(--lambdas\): must be >= 0/);
  assert.throws(() => parseStudyGrid({ lambdas: [1e7] }, "study"), /study: lambdas\.0 \(--lambdas\): must be at most 1000000 \(beyond it/);
  assert.throws(() => parseStudyGrid({ train: { epoch: 3 } }, "study"), /study: train: .*epoch/);
  assert.throws(() => parseStudyGrid({ seeds: "0,1" }, "study"), /study: seeds \(--seeds\): expected a JSON array such as \[0, 1\], got the string "0,1"/);
  assert.throws(
    () => parseStudyGrid(JSON.parse('{ "lambdas": [0, 1e999] }'), "study"),
    /study: lambdas\.1 \(--lambdas\): expected a finite number, got Infinity \(a JSON number beyond about 1\.8e308 reads as Infinity\)$/,
  );
  assert.throws(() => expandGrid(parseStudyGrid({ data: ["csv:a b.csv", "csv:a_b.csv"] }, "t")), /two runs of the grid would share the folder/);
});
