import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runStudy } from "../../src/pipelines/studyRun.ts";
import { expandGrid, parseStudyGrid } from "../../src/study/grid.ts";
import { pretrainBases, pretrainIdOf } from "../../src/study/pretrain.ts";
import { tempDir } from "../train/helpers.ts";

/** One seed, two lambdas, a pretrained model: sized to run in seconds. */
const GRID = parseStudyGrid(
  {
    model: ["vit-micro"], lambdas: [0, 0.5], seeds: [4],
    train: { epochs: 1, pretrainEpochs: 2, pretrainLr: 3e-3, lr: 1e-3, trainSize: 96, testLimit: 100 },
    analyze: { n: 1, iterations: 5 },
    attack: { n: 4, linf: [0.05], l2: [0.5], steps: 2 },
  },
  "test",
);

test("a study with --pretrain-epochs trains one model per seed and fine-tunes it per lambda; a shard waits for the model another shard pretrains", async () => {
  const runs = expandGrid(GRID);
  assert.deepEqual(pretrainBases(GRID, runs).map((b) => b.id), ["mnist_vit-micro_seed4"]);
  assert.deepEqual(runs.map(pretrainIdOf), ["mnist_vit-micro_seed4", "mnist_vit-micro_seed4"]);
  assert.deepEqual(pretrainBases(parseStudyGrid({}, "t"), expandGrid(parseStudyGrid({}, "t"))), []);

  const out = join(tempDir("attnlip-study-"), "study");
  const lines: [string, string][] = [];
  const write = process.stdout.write;
  process.stdout.write = (() => true) as typeof process.stdout.write;
  try {
    // Two shards of a job array, started together: shard 1 pretrains the model and runs lambda
    // 0; shard 2 has only lambda 0.5's run and must wait for shard 1's model.
    await Promise.all(
      [1, 2].map((k) =>
        runStudy({ out, grid: GRID, shard: { k, n: 2 }, backend: "wasm", workers: 1, pollMs: 50, progress: (l) => lines.push([`${k}`, l]), log: () => {} }),
      ),
    );
  } finally {
    process.stdout.write = write;
  }
  const text = lines.map(([k, l]) => `${k}: ${l}`).join("\n");
  assert.match(text, /^1: study \(shard 1\/2\): pretrain 1\/1 mnist_vit-micro_seed4 done in .*: test accuracy \d+\.\d\d%$/m);
  assert.match(text, /^2: study \(shard 2\/2\): waiting for the pretrained model mnist_vit-micro_seed4 \(pretrained by shard 1\/2\)$/m);
  assert.match(text, /^2: study \(shard 2\/2\): run 1\/1 mnist_vit-micro_lambda0.5_top2_max-log_seed4: fine-tune mnist_vit-micro_seed4 for 1 epoch\(s\)/m);

  const base = join(out, "pretrain", "mnist_vit-micro_seed4");
  const baseState = JSON.parse(readFileSync(join(base, "train_state.json"), "utf8"));
  assert.equal(baseState.epoch, 2);
  assert.equal(baseState.jasmin.lambda, 0);
  assert.equal(baseState.optimizer.lr, 3e-3);
  const sha = createHash("sha256").update(readFileSync(join(base, "model.safetensors"))).digest("hex");
  for (const run of runs) {
    const state = JSON.parse(readFileSync(join(out, "runs", run.id, "train_state.json"), "utf8"));
    assert.deepEqual(state.pretrained, { source: "attnlip", path: base, epoch: 2, step: baseState.step, weightsSha256: sha });
    assert.equal(state.jasmin.lambda, run.lambda);
    assert.equal(state.optimizer.lr, 1e-3);
    assert.equal(state.epoch, 1);
    assert.equal(state.data.testDigest, baseState.data.testDigest);
  }
  // The last shard to finish aggregated both runs, and names the pretrained model.
  const summary = JSON.parse(readFileSync(join(out, "study.json"), "utf8"));
  assert.equal(summary.finished, 2);
  assert.equal(summary.pretrained.length, 1);
  assert.equal(summary.pretrained[0].id, "mnist_vit-micro_seed4");
  assert.equal(summary.pretrained[0].testAccuracy, baseState.history.at(-1).testAccuracy);
});
