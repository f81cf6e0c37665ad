// Where results go, and when an unusable place is found: `analyze CHECKPOINT` writes
// CHECKPOINT/analysis.json as `attack CHECKPOINT` writes CHECKPOINT/attack.json (so that
// `report CHECKPOINT` finds both), and an --out that cannot be written is refused before the
// work starts, naming the flag. Also: a radius's upper limit comes from the model's input space.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkImageEps } from "../../src/robustness/modelInputs/index.ts";
import { checkOutPath } from "../../src/io/outPath.ts";
import { InputError } from "../../src/util/errors.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "attnlip-outputs-"));

/** Runs `attnlip ...` asynchronously (so several can run at once). */
function attnlip(args: string[], cwd?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"], cwd });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const QUICK_ANALYZE = ["--n", "2", "--no-head-truth", "--no-block-truth", "--iterations", "5"];

test("analyze on a checkpoint writes CHECKPOINT/analysis.json and .csv by default; report then reads it", async () => {
  const ck = join(dir, "ck");
  // Trained in this process; the analysis runs as a user runs it.
  const trained = await runAttnlipHere([
    "train", "--model", "vit-micro", "--epochs", "1", "--limit", "64", "--test-limit", "16",
    "--out", ck, "--progress", "none",
  ]);
  assert.equal(trained.code, 0, trained.stderr);
  const analyzed = await attnlip(["analyze", ck, ...QUICK_ANALYZE]);
  assert.equal(analyzed.code, 0, analyzed.stderr);
  assert.ok(existsSync(join(ck, "analysis.json")), "analysis.json in the checkpoint folder");
  assert.ok(existsSync(join(ck, "analysis.csv")), "analysis.csv in the checkpoint folder");
  assert.match(analyzed.stdout, new RegExp(`wrote ${join(ck, "analysis.json").replace(/[.\\]/g, "\\$&")} and `));
  const report = await runAttnlipHere(["report", ck, "--out", join(dir, "report.html")]);
  assert.equal(report.code, 0, report.stderr);
  assert.ok(existsSync(join(dir, "report.html")));
});

test("analyze on a random-init model without --out writes nothing and says how to", async () => {
  const cwd = join(dir, "cwd");
  mkdirSync(cwd);
  const r = await runAttnlipHere(["analyze", "--random-init", "--model", "vit-micro", ...QUICK_ANALYZE], { cwd });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /give --out DIR to write analysis\.json/);
  assert.deepEqual(readdirSync(cwd), [], "nothing written");
});

test("an --out that cannot be written is refused before the work, naming the flag", async () => {
  const afile = join(dir, "afile");
  writeFileSync(afile, "not a folder\n");
  const folder = join(dir, "a-folder");
  mkdirSync(folder);
  const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const cases: [string[], RegExp][] = [
    [
      ["attack", "--random-init", "--model", "vit-micro", "--n", "2", "--out", join(afile, "attack.json")],
      new RegExp(`^attnlip: attack: --out: cannot create ${esc(join(afile, "attack.json"))}: ${esc(afile)} is a file, not a folder$`),
    ],
    [
      ["attack", "--random-init", "--model", "vit-micro", "--n", "2", "--out", folder],
      /^attnlip: attack: --out: .*a-folder is a folder; give the path of a file$/,
    ],
    [
      ["analyze", "--random-init", "--model", "vit-micro", ...QUICK_ANALYZE, "--out", afile],
      /^attnlip: analyze: --out: .*afile is a file, not a folder$/,
    ],
    [
      ["analyze", "--random-init", "--model", "vit-micro", ...QUICK_ANALYZE, "--out", join(afile, "x", "y")],
      /^attnlip: analyze: --out: cannot create .*afile\/x\/y: .*afile is a file, not a folder$/,
    ],
    [["train", "--out", join(afile, "run"), "--limit", "8"], /^attnlip: train: --out: cannot create .*: .*afile is a file, not a folder$/],
    [["demo", "--quick", "--out", join(afile, "demo")], /^attnlip: demo: --out: cannot create .*: .*afile is a file, not a folder$/],
  ];
  // In this process (runAttnlipHere): every case is refused before any work starts.
  for (const [args, pattern] of cases) {
    const r = await runAttnlipHere(args);
    const what = args.join(" ");
    assert.equal(r.code, 2, `${what}: exit ${r.code}, stderr ${r.stderr}`);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${what}: ${r.stderr}`);
    assert.match(lines[0], pattern, what);
    assert.doesNotMatch(r.stdout, /attacking|analyzing|epoch|training/, `${what}: no work started`);
  }
  // The check itself: nothing is created, and a writable place passes.
  checkOutPath(join(dir, "new", "deeper", "attack.json"), "file", "--out", "attack");
  checkOutPath(join(dir, "new-folder"), "folder", "--out", "analyze");
  assert.ok(!existsSync(join(dir, "new")) && !existsSync(join(dir, "new-folder")), "nothing created");
  assert.throws(() => checkOutPath("", "folder", "--out", "analyze"), /^InputError: analyze: --out: must not be empty$/);
});

test("the eps limit of an image attack comes from the data: its pixel range and its image size", () => {
  const refuses = (call: () => void, pattern: RegExp) =>
    assert.throws(call, (e: unknown) => e instanceof InputError && pattern.test(e.message));
  // MNIST: 28x28x1 in [0, 1].
  checkImageEps([1, 28], "l2", [0, 1], [28, 28, 1], "mnist");
  refuses(
    () => checkImageEps([0, 28.5], "l2", [0, 1], [28, 28, 1], "mnist"),
    /^attack: --eps: 28\.5 is out of range for --norm l2 \(at most 28, the l_2 diameter of 28x28x1 images in the pixel range \[0, 1\] of mnist/,
  );
  refuses(
    () => checkImageEps([8], "linf", [0, 1], [28, 28, 1], "mnist"),
    /^attack: --eps: 8 is out of range for --norm linf \(at most 1, the width of the pixel range \[0, 1\] of mnist; for 8\/255 write 0\.03137\)$/,
  );
  // CIFAR-10's 32x32x3: the l_2 diameter is sqrt(3072) = 55.4, not MNIST's 28.
  checkImageEps([50], "l2", [0, 1], [32, 32, 3], "cifar10:DIR");
  refuses(
    () => checkImageEps([56], "l2", [0, 1], [32, 32, 3], "cifar10:DIR"),
    /^attack: --eps: 56 is out of range for --norm l2 \(at most 55\.4256, the l_2 diameter of 32x32x3 images in the pixel range \[0, 1\] of cifar10:DIR, 1 \* sqrt\(32\*32\*3\)\)$/,
  );
  // Another pixel range: its own width.
  checkImageEps([8], "linf", [0, 255], [28, 28, 1], "toy");
  refuses(() => checkImageEps([300], "linf", [0, 255], [28, 28, 1], "toy"), /at most 255, the width of the pixel range \[0, 255\] of toy\)$/);
});

test("text models are attacked in embedding space: no upper limit on eps in either norm", async () => {
  const csv = join(dir, "mail.csv");
  const rows = ["text,label"];
  for (let i = 0; i < 40; i++) rows.push(i % 2 === 0 ? `free money offer now ${i},spam` : `project meeting notes ${i},ham`);
  writeFileSync(csv, rows.join("\n") + "\n");
  const common = ["attack", "--random-init", "--model", "text-tiny", "--data", `csv:${csv}`, "--n", "4", "--steps", "1"];
  const linf = await runAttnlipHere([...common, "--norm", "linf", "--eps", "0,8", "--out", join(dir, "t-linf.json")]);
  const l2 = await runAttnlipHere([...common, "--norm", "l2", "--eps", "0,1e6", "--out", join(dir, "t-l2.json")]);
  assert.equal(linf.code, 0, linf.stderr);
  assert.equal(l2.code, 0, l2.stderr);
  assert.ok(existsSync(join(dir, "t-linf.json")) && existsSync(join(dir, "t-l2.json")));
});
