// Ctrl-C during training says what was saved and how to continue; --resume says where it
// resumes (issue 38, case 14: both printed nothing).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { interruptedLine } from "../../src/train/trainer.ts";
import { readSavedTrainState } from "../../src/train/checkpoint.ts";
import { runAttnlip, startAttnlip } from "../helpers/cli.ts";

const FIXTURE = fileURLToPath(new URL("../fixtures/demo-vit-tiny/baseline/", import.meta.url));

test("Ctrl-C during train prints one line naming the saved epoch and the --resume command; --resume says where it resumes", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "attnlip-ctrl-c-")), "run");
  const run = startAttnlip(
    [
      "train",
      "--model",
      "vit-micro",
      "--limit",
      "64",
      "--test-limit",
      "32",
      "--epochs",
      "1000",
    ].concat(["--out", out, "--workers", "1", "--progress", "lines"]),
    `train (out ${out})`,
  );
  await run.waitFor(/epoch 1\/1000: .*checkpoint saved/);
  run.child.kill("SIGINT");
  const end = await run.exited;
  const { stderr } = run.io;
  assert.deepEqual(end, { code: 130, signal: null }, stderr);
  const saved = readSavedTrainState(out);
  assert.ok(saved !== null && saved.epoch >= 1, "a checkpoint was saved");
  assert.equal(
    stderr.trim().split("\n").at(-1),
    `train: interrupted; ${out} keeps its checkpoint of epoch ${saved.epoch} of 1000 (step ${2 * saved.epoch}): continue with attnlip train --resume ${out}`,
  );

  const resumed = runAttnlip([
    "train",
    "--resume",
    out,
    "--epochs",
    String(saved.epoch + 1),
    "--workers",
    "1",
    "--progress",
    "none",
  ]);
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.match(
    resumed.stdout,
    new RegExp(
      `^resuming from epoch ${saved.epoch} step ${2 * saved.epoch} of ${out.replaceAll("/", "\\/")} \\(its last checkpoint\\): training epochs ${saved.epoch + 1} to ${saved.epoch + 1}$`,
      "m",
    ),
  );
});

test("interruptedLine: nothing saved yet; a commit under way counts as saved (its journal rolls it forward on load)", () => {
  const empty = mkdtempSync(join(tmpdir(), "attnlip-ctrl-c-"));
  assert.equal(
    interruptedLine(empty),
    `train: interrupted before the first checkpoint (one is saved at the end of each epoch): nothing was saved in ${empty}; run the command again to start over`,
  );
  // A valid state of a real run (test/fixtures/demo-vit-tiny/baseline), then a commit of the next epoch
  // under way: its journal exists and the new train_state.json is still a temporary file.
  const dir = mkdtempSync(join(tmpdir(), "attnlip-ctrl-c-"));
  const state = JSON.parse(readFileSync(join(FIXTURE, "train_state.json"), "utf8"));
  writeFileSync(join(dir, "train_state.json"), JSON.stringify(state));
  assert.equal(readSavedTrainState(dir)?.epoch, state.epoch);
  writeFileSync(
    join(dir, "train_state.json.tmp"),
    JSON.stringify({ ...state, epoch: state.epoch + 1 }),
  );
  assert.equal(
    readSavedTrainState(dir)?.epoch,
    state.epoch,
    "a stray .tmp without a journal is ignored",
  );
  writeFileSync(
    join(dir, "checkpoint.commit.json"),
    JSON.stringify({ files: ["train_state.json"] }),
  );
  assert.match(
    interruptedLine(dir),
    new RegExp(`keeps its checkpoint of epoch ${state.epoch + 1} of `),
  );
  writeFileSync(join(dir, "train_state.json"), "{ not json");
  rmSync(join(dir, "checkpoint.commit.json"));
  assert.equal(readSavedTrainState(dir), null, "an unreadable train_state.json is no checkpoint");
});

test("Ctrl-C in the middle of an epoch with --workers 1 stops at once, not at the end of the epoch", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "attnlip-ctrl-c-mid-")), "run");
  const run = startAttnlip(
    [
      "train",
      "--model",
      "vit-micro",
      "--limit",
      "4096",
      "--test-limit",
      "32",
      "--batch",
      "8",
    ].concat(["--epochs", "1", "--out", out, "--workers", "1", "--progress", "lines"]),
    `train (out ${out})`,
  );
  await run.waitFor(/step \d+\/512/);
  run.child.kill("SIGINT");
  const end = await run.exited;
  const { stdout, stderr } = run.io;
  assert.deepEqual(end, { code: 130, signal: null }, stderr);
  const steps = [...stdout.matchAll(/step (\d+)\/512/g)].map((m) => Number(m[1]));
  assert.ok(Math.max(...steps) < 512, `the epoch ran to its end after Ctrl-C: ${stdout}`);
  assert.doesNotMatch(stdout, /epoch 1\/1:/, "the epoch's summary was printed after Ctrl-C");
  assert.equal(
    readSavedTrainState(out),
    null,
    "no checkpoint is saved by an interrupted first epoch",
  );
  assert.match(
    stderr.trim().split("\n").at(-1)!,
    /^train: interrupted before the first checkpoint/,
  );
});
