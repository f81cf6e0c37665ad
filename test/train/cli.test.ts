import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseTrainFlags } from "../../src/cli/trainCommand.ts";
import { InputError } from "../../src/util/errors.ts";
import { tempDir, TINY } from "./helpers.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));

/** Runs `attnlip train ...` asynchronously (so several can run at once). */
function runTrain(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, "train", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

test("parseTrainFlags names the bad flag in one line", () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ out: "x", epochs: "abc" }, /^train: --epochs: must be an integer from 1 to 100000, got "abc"$/],
    [{ out: "x", epochs: "1.5" }, /^train: --epochs: must be an integer from 1 to 100000, got "1.5"$/],
    [{ out: "x", batch: "0" }, /^train: --batch: must be a positive integer, got "0"$/],
    [{ out: "x", lr: "-1" }, /^train: --lr: must be a finite number > 0, got "-1"$/],
    [{ out: "x", lr: "1e" }, /^train: --lr: must be a finite number > 0, got "1e"$/],
    [{ out: "x", lr: "1e400" }, /^train: --lr: must be a finite number > 0, got "1e400"$/],
    [{ out: "x", weightDecay: "-0.1" }, /^train: --weight-decay: must be a finite number >= 0/],
    [{ out: "x", warmup: "2.5" }, /^train: --warmup: must be an integer >= 0, got "2.5"$/],
    [{ out: "x", clip: "Infinity" }, /^train: --clip: must be a finite number >= 0, got "Infinity"$/],
    [{ out: "x", jasmin: "-1" }, /^train: --jasmin: must be a number from 0 to 1000000 \(.*float32\), got "-1"$/],
    // A weight that large trains on the penalty alone: refused, and the message says why.
    [{ out: "x", jasmin: "1e300" }, /^train: --jasmin: must be a number from 0 to 1000000 \(beyond that the penalty drowns the cross-entropy in float32\), got "1e300"$/],
    // The cosine decay ends at --min-lr: above the peak --lr (given or default) it would rise.
    [{ out: "x", minLr: "0.01", lr: "0.001" }, /^train: --min-lr 0\.01 is above --lr 0\.001: /],
    [{ out: "x", minLr: "0.01" }, /^train: --min-lr 0\.01 is above --lr 0\.002 \(the default\)/],
    [{ out: "x", jasminNorm: "l2" }, /^train: --jasmin-norm: expected top2, quad or exact/],
    [{ out: "x", jasminReduce: "sum" }, /^train: --jasmin-reduce: expected max-log, max or mean/],
    [{ out: "x", jasminLayers: "0,a" }, /^train: --jasmin-layers: must be block indices/],
    [{ out: "x", data: "imagenet" }, /^train: --data: expected mnist \| idx:DIR \| cifar10:DIR \| spam \| csv:FILE \| jsonl:FILE, got "imagenet"$/],
    [{ out: "x", backend: "gpu" }, /^train: --backend: expected wasm or cpu/],
    [{ out: "x", seed: "-3" }, /^train: --seed: must be an integer from 0 to 4294967295, got "-3"$/],
    [{ out: "x", limit: "0" }, /^train: --limit: must be a positive integer, got "0"$/],
    [{}, /^train: --out DIR is required/],
    [{ resume: "r", lr: "0.1" }, /^train: --lr cannot be given with --resume/],
    [{ resume: "r", out: "other" }, /^train: --out must be left out with --resume/],
  ];
  for (const [raw, pattern] of cases)
    assert.throws(
      () => parseTrainFlags(raw),
      (e: unknown) => e instanceof InputError && pattern.test(e.message) && !e.message.includes("\n"),
      JSON.stringify(raw),
    );
  const ok = parseTrainFlags({ out: "x", epochs: "3", lr: "2e-3", jasmin: "0.01", jasminLayers: "0, 2" });
  assert.equal(ok.epochs, 3);
  assert.equal(ok.lr, 0.002);
  assert.deepEqual(ok.jasminLayers, [0, 2]);
  assert.equal(parseTrainFlags({ resume: "r", epochs: "4" }).epochs, 4);
  // min-lr up to lr, and lambda up to the bound, are accepted.
  assert.equal(parseTrainFlags({ out: "x", minLr: "0.001", lr: "0.001" }).minLr, 0.001);
  assert.equal(parseTrainFlags({ out: "x", jasmin: "1e6" }).jasmin, 1e6);
});

test("the CLI rejects bad flags with exit code 2 and one line on stderr", async () => {
  const out = tempDir();
  const cases: [string[], RegExp][] = [
    [["--out", out, "--epochs", "zero"], /--epochs/],
    [["--out", out, "--epochs", "1e12"], /train: --epochs: must be an integer from 1 to 100000, got "1e12"/],
    [["--out", out, "--jasmin-norm", "l2"], /--jasmin-norm/],
    [["--out", out, "--bogus"], /unknown option '--bogus'/],
    [["--epochs", "1"], /--out DIR is required/],
    [["--resume", join(out, "missing")], /checkpoint .*missing: no such folder/],
    [["--out", join(out, "a"), "--data", "idx:/nonexistent-folder", "--limit", "8"], /nonexistent-folder/],
    [["--out", join(out, "b"), "--model", "vit-tiny", "--jasmin-layers", "7", "--limit", "8", "--test-limit", "8"], /--jasmin-layers|jasmin-layers: layer 7 does not exist/],
  ];
  // In this process, one after another (no start-up per case); the first case also runs as a separate process, as a user would.
  const results = [];
  for (const [k, [args]] of cases.entries()) results.push(k === 0 ? await runTrain(args) : await runAttnlipHere(["train", ...args]));
  results.forEach((r, i) => {
    const [args, pattern] = cases[i];
    assert.equal(r.code, 2, `${args.join(" ")}: exit ${r.code}, stderr ${r.stderr}`);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${args.join(" ")}: stderr ${r.stderr}`);
    assert.match(lines[0], /^attnlip: /);
    assert.match(lines[0], pattern);
  });
});

test("the CLI trains a tiny model for one epoch, prints the summary and writes a checkpoint", async () => {
  const out = join(tempDir(), "run");
  const r = await runTrain([
    "--model", JSON.stringify(TINY), "--epochs", "1", "--batch", "32", "--limit", "64", "--test-limit", "64",
    "--jasmin", "0.1", "--out", out, "--progress", "lines",
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /final test accuracy \d+\.\d+%, wall time \d+\.\d s, \d+\.\d img\/s \(training steps\)/);
  assert.match(r.stdout, /epoch 1\/1 step 2\/2 \(100%\).* img\/s /);
  assert.match(r.stdout, /^epoch 1\/1: .*\(\d+\.\d img\/s\)/m, "the epoch line of an image model counts images");
  for (const f of ["config.json", "model.safetensors", "optimizer.safetensors", "train_state.json", "metrics.jsonl"])
    assert.ok(existsSync(join(out, f)), f);
  const state = JSON.parse(readFileSync(join(out, "train_state.json"), "utf8"));
  assert.equal(state.jasmin.lambda, 0.1);
  assert.equal(state.data.trainCount, 64);
  // Resuming a finished run to 2 epochs continues it.
  const again = await runTrain(["--resume", out, "--epochs", "2", "--progress", "none"]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(readFileSync(join(out, "train_state.json"), "utf8")).epoch, 2);
});
