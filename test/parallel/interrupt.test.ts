// Issue 12: Ctrl-C during a run with worker threads. The command must stop at once, leave no
// process behind and keep the last checkpoint it saved loadable.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { runAttnlip, startAttnlip } from "../helpers/cli.ts";
import { HANG_MS } from "../helpers/patience.ts";
import { tempDir } from "../train/helpers.ts";

await useBackend("wasm");


/** Process ids whose command line mentions `text` (Linux /proc; empty elsewhere). */
function processesMentioning(text: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  return entries.flatMap((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(text) ? [Number(pid)] : [];
    } catch {
      return [];
    }
  });
}

test("SIGINT to train --workers 2 after its first checkpoint: it exits at once, leaves no process, and the checkpoint loads", async () => {
  const out = join(tempDir("attnlip-sigint-"), "run");
  // No fixed limit (test/helpers/patience.ts): train prints progress lines; only a silence of
  // HANG_MS before its first checkpoint fails the test.
  const run = startAttnlip(
    ["train", "--data", "mnist", "--model", "vit-micro", "--limit", "640", "--test-limit", "100", "--epochs", "50", "--batch", "32", "--out", out, "--workers", "2", "--progress", "lines"],
    `train --workers 2 (out ${out}) before its first checkpoint`,
  );
  await run.waitFor(/epoch 1\/50: .*checkpoint saved/);
  const { child, exited } = run;
  const stdout = run.io.stdout;
  assert.match(stdout, /on 2 workers/);
  child.kill("SIGINT");
  const end = await Promise.race([exited, new Promise<null>((r) => setTimeout(() => r(null), HANG_MS).unref())]);
  assert.notEqual(end, null, `train --workers 2 (out ${out}) did not stop within ${HANG_MS / 1000} s of SIGINT: hung`);
  assert.ok(end!.signal === "SIGINT" || end!.code === 130, `exit ${JSON.stringify(end)}`);
  assert.deepEqual(processesMentioning(out), [], "a process of the run is still alive");
  const saved = await loadCheckpoint(out);
  assert.ok(saved.trainState.epoch >= 1);
  saved.model.dispose();
});

test("train --workers takes an integer from 1 to 256, and a bad ATTNLIP_WORKERS stops it before anything loads (exit 2, one line)", () => {
  const out = join(tempDir("attnlip-workers-"), "run");
  const r = runAttnlip(["train", "--out", out, "--workers", "1.5"]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(r.stderr, /train: --workers: must be an integer from 1 to 256, got "1.5"/);
  const env = runAttnlip(["train", "--out", out], { env: { ATTNLIP_WORKERS: "0" } });
  assert.equal(env.code, 2, env.stderr);
  assert.match(env.stderr, /ATTNLIP_WORKERS: must be an integer from 1 to 256 \(or unset: the number of cores\), got "0"/);
  assert.equal(env.stdout, "");
});
