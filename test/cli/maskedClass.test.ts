// A checkpoint whose head rules classes out (a bias of -Infinity: those logits are -Infinity):
// `attnlip analyze` takes it as `attack` does, and `train --init` from it, which diverges at its
// first step on the base's own loss, says why instead of advising a lower --lr.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { initDivergence } from "../../src/cli/trainCommand.ts";
import { decodeSafetensors, encodeSafetensors } from "../../src/io/safetensors.ts";
import { TrainingDiverged } from "../../src/train/epoch.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "attnlip-masked-"));
const base = join(dir, "base");

/** Trains a tiny base checkpoint, then sets the head's bias of `classes` to -Infinity. */
async function maskedBase(classes: readonly number[]): Promise<void> {
  const r = await runAttnlipHere([
    "train",
    "--data",
    "mnist",
    "--model",
    "vit-micro",
    "--limit",
    "64",
    "--test-limit",
    "16",
    "--epochs",
    "1",
    "--workers",
    "1",
    "--progress",
    "none",
    "--backend",
    "cpu",
    "--out",
    base,
  ]);
  assert.equal(r.code, 0, r.stderr);
  const file = join(base, "model.safetensors");
  const { tensors, metadata } = decodeSafetensors(readFileSync(file));
  const bias = tensors.get("head.b")!;
  for (const k of classes) bias.data[k] = -Infinity;
  writeFileSync(file, encodeSafetensors(tensors, metadata));
}

test("a checkpoint with -Infinity logits: analyze accepts it; train --init from it names the cause, not --lr", async () => {
  await maskedBase([0, 1, 2, 3, 4, 5, 6, 7, 8]); // every class but 9: the first batch's loss is infinite
  const analyzed = await runAttnlipHere([
    "analyze",
    base,
    "--n",
    "2",
    "--iterations",
    "20",
    "--backend",
    "cpu",
    "--out",
    join(dir, "analysis"),
  ]);
  assert.equal(analyzed.code, 0, analyzed.stderr);
  assert.match(analyzed.stdout, /wrote .*analysis\.json/);
  const trained = await runAttnlipHere([
    "train",
    "--init",
    base,
    "--epochs",
    "1",
    "--workers",
    "1",
    "--progress",
    "none",
    "--backend",
    "cpu",
    "--out",
    join(dir, "ft"),
  ]);
  assert.equal(trained.code, 2, trained.stderr);
  const line = trained.stderr.trim();
  assert.equal(line.split("\n").length, 1, line);
  assert.match(line, /^attnlip: training diverged at epoch 1, step 1: the loss is Infinity /);
  assert.match(
    line,
    /before any update \(--lr, --clip and --jasmin have not acted yet\): an infinite logit .*-Infinity for an example's own class/,
  );
  assert.doesNotMatch(line, /try a lower --lr/);
});

test("initDivergence rewords only a first-step divergence of an --init run", () => {
  const at = (step: number, ce: string) =>
    new TrainingDiverged(
      `training diverged at epoch 1, step ${step}: the loss is ${ce} (cross-entropy ${ce}, jasmin 0, lr 0.00200); no checkpoint had been written yet; try a lower --lr, --clip or --jasmin, or check the data for NaN`,
      1,
      step,
    );
  const nan = initDivergence(at(1, "NaN"), "runs/base") as Error;
  assert.ok(nan instanceof TrainingDiverged);
  assert.match(
    nan.message,
    /runs\/base's own loss and gradient, before any update .*: its weights, or the data, hold NaN or infinite values$/,
  );
  const later = at(7, "Infinity");
  assert.equal(initDivergence(later, "runs/base"), later, "a later step: --lr may be the cause");
  const fresh = at(1, "Infinity");
  assert.equal(initDivergence(fresh, undefined), fresh, "no --init");
  const other = new Error("x");
  assert.equal(initDivergence(other, "runs/base"), other);
});
