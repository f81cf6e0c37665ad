import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { parseTrainFlags } from "../../src/cli/trainCommand.ts";
import { CheckpointError, loadCheckpoint } from "../../src/train/checkpoint.ts";
import { train } from "../../src/train/trainer.ts";
import { InputError } from "../../src/util/errors.ts";
import { QUIET, tempDir, TINY } from "./helpers.ts";

await useBackend("wasm");

test("train --init starts a new run from a checkpoint's weights on its data and split, records the base, and resumes like any run", async () => {
  const work = tempDir();
  const base = join(work, "base");
  const first = await train({ ...QUIET, data: "mnist", limit: 256, testLimit: 64, model: TINY, epochs: 1, seed: 3, out: base });
  const baseWeights = first.model.getWeights();
  first.model.dispose();
  const baseState = (await loadCheckpoint(base)).trainState;

  // Before any step the model is the base's, bit for bit.
  const zero = await train({ ...QUIET, init: base, epochs: 1, stopAfterEpoch: 0, out: null });
  for (const [name, w] of zero.model.getWeights()) assert.deepEqual(w.data, baseWeights.get(name)!.data, name);
  zero.model.dispose();

  // Two epochs with JaSMin, stopped after the first and resumed: a run of its own.
  const ft = join(work, "ft");
  const options = { ...QUIET, init: base, epochs: 2, lr: 1e-3, jasmin: { lambda: 0.1 }, out: ft };
  (await train({ ...options, stopAfterEpoch: 1 })).model.dispose();
  const resumed = await train({ ...QUIET, resume: ft });
  resumed.model.dispose();
  const ckpt = await loadCheckpoint(ft);
  const state = ckpt.trainState;
  ckpt.model.dispose();
  assert.deepEqual(state.pretrained, {
    source: "attnlip",
    path: base,
    epoch: 1,
    step: 8,
    weightsSha256: createHash("sha256").update(readFileSync(join(base, "model.safetensors"))).digest("hex"),
  });
  // The base's data and split (so its test digits stay held out), the new run's own schedule.
  assert.equal(state.seed, 3);
  for (const key of ["spec", "limit", "testLimit", "trainCount", "testCount", "trainDigest", "testDigest", "contentDigest"] as const)
    assert.equal(state.data[key], baseState.data[key], key);
  assert.equal(state.epoch, 2);
  assert.equal(state.step, 16);
  assert.equal(state.optimizer.lr, 1e-3);
  assert.equal(state.optimizer.totalSteps, 16);
  assert.equal(state.jasmin.lambda, 0.1);
  assert.deepEqual(state.history.map((h) => h.epoch), [1, 2]);

  // Refused: the base as the output folder, a folder with a checkpoint, no checkpoint, both --init and --resume.
  await assert.rejects(train({ ...QUIET, init: base, out: base }), (e: Error) => e instanceof InputError && /^out: .* is the checkpoint given to --init/.test(e.message));
  await assert.rejects(train({ ...QUIET, init: base, out: ft }), (e: Error) => e instanceof InputError && /already holds a checkpoint/.test(e.message));
  await assert.rejects(train({ ...QUIET, init: join(work, "none"), out: join(work, "x") }), CheckpointError);
  await assert.rejects(train({ ...QUIET, init: base, resume: ft }), /give --resume or --init, not both/);
});

test("train's flags: --init refuses what the base fixes, and --resume with it", () => {
  assert.throws(() => parseTrainFlags({ init: "b", out: "o", data: "spam" }), /^InputError: train: --data cannot be given with --init/);
  assert.throws(() => parseTrainFlags({ init: "b", out: "o", seed: "1" }), /--seed cannot be given with --init/);
  assert.throws(() => parseTrainFlags({ init: "b", resume: "r" }), /--resume and --init cannot be given together/);
  assert.throws(() => parseTrainFlags({ init: "b" }), /--out DIR is required/);
  assert.equal(parseTrainFlags({ init: "b", out: "o", jasmin: "0.1", epochs: "2" }).init, "b");
});
