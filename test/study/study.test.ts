import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runStudy } from "../../src/pipelines/studyRun.ts";
import { expandGrid, parseStudyGrid } from "../../src/study/grid.ts";
import type { RunResult } from "../../src/study/result.ts";
import { studyTable } from "../../src/study/table.ts";
import { buildStudyReport } from "../../src/report/study.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";
import { tempDir } from "../train/helpers.ts";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));

/** The test grid: vit-micro, 2 seeds x 2 lambdas, sized to run in seconds. */
const FLAGS = [
  "--model", "vit-micro", "--lambdas", "0,0.5", "--seeds", "0,1", "--epochs", "2", "--train-size", "96", "--test-limit", "200",
  "--analyze-n", "2", "--iterations", "10", "--attack-n", "8", "--eps-linf", "0,0.05", "--eps-l2", "0.5", "--steps", "3",
];
const GRID = parseStudyGrid(
  {
    model: ["vit-micro"], lambdas: [0, 0.5], seeds: [0, 1],
    train: { epochs: 2, trainSize: 96, testLimit: 200 }, analyze: { n: 2, iterations: 10 },
    attack: { n: 8, linf: [0, 0.05], l2: [0.5], steps: 3 },
  },
  "test",
);
const RUNS = expandGrid(GRID);

const result = (dir: string, id: string) => JSON.parse(readFileSync(join(dir, "runs", id, "result.json"), "utf8")) as RunResult;
const withoutSeconds = ({ seconds: _, ...r }: RunResult) => r;

test("a vit-micro study (2 seeds x 2 lambdas) trains, analyses and attacks every run and aggregates them; a kill mid-study loses nothing and the rerun gives the same results", async () => {
  // Uninterrupted, in this process.
  const whole = join(tempDir("attnlip-study-"), "study");
  const lines: string[] = [];
  // The stages print their tables on stdout: kept out of the test runner's own report stream.
  const write = process.stdout.write;
  process.stdout.write = (() => true) as typeof process.stdout.write;
  let summary: Awaited<ReturnType<typeof runStudy>>;
  try {
    summary = await runStudy({ out: whole, grid: GRID, backend: "wasm", workers: 1, progress: (l) => lines.push(l), log: () => {} });
  } finally {
    process.stdout.write = write;
  }
  assert.equal(summary.finished, 4);
  assert.match(lines.join("\n"), /run 2\/4 mnist_vit-micro_lambda0_top2_max-log_seed1 done in .*left for 2 run\(s\)/);
  for (const run of RUNS) {
    const r = result(whole, run.id);
    assert.ok(r.cleanAccuracy >= 0 && r.cleanAccuracy <= 1 && r.testExamples === 200, JSON.stringify(r));
    assert.equal(r.attacked, 8);
    assert.ok(r.networkTrue! > 0);
    for (const [variant, ratio] of Object.entries(r.networkRatio)) assert.ok(ratio! >= 1 - 1e-9, `${variant} bound below the truth: ${ratio}`);
    assert.deepEqual(r.robust.map((p) => `${p.norm} ${p.attack} ${p.eps}`), ["linf apgd 0.05", "l2 apgd 0.5"]);
    for (const p of r.robust) assert.ok(p.accuracy! <= r.attackedCleanAccuracy);
  }
  const [l0, l1] = summary.groups[0].lambdas;
  assert.deepEqual([l0.seeds, l1.seeds], [[0, 1], [0, 1]]);
  assert.ok(l1.difference!.networkTrue !== null);
  assert.ok(existsSync(join(whole, "study.csv")));
  // The study report: a table and error-bar charts per group.
  const html = join(whole, "..", "study.html");
  const report = await runAttnlipHere(["report", whole, "--out", html]);
  assert.equal(report.code, 0, report.stderr);
  const page = readFileSync(html, "utf8");
  for (const chart of ["group-0-lambda", "group-0-clean-robust"]) assert.match(page, new RegExp(`data-chart="${chart}"[^>]*>\\n<svg`));
  assert.match(page, /Δ λ = 0\.5 − 0 \[95% CI\]/);
  assert.doesNotMatch(page, /<script|https?:\/\//);
  const both = await runAttnlipHere(["report", whole, tempDir("attnlip-other-"), "--out", html]);
  assert.equal(both.code, 2);
  assert.match(both.stderr, /report: .* is a study folder: report it alone/);

  // In a process killed (SIGKILL) once the second run has its first checkpoint, then rerun without flags.
  const killed = join(tempDir("attnlip-study-kill-"), "study");
  const child = spawn(process.execPath, [bin, "study", killed, ...FLAGS, "--workers", "1"], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const mark = join(killed, "runs", RUNS[1].id, "train_state.json");
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (existsSync(mark)) {
        clearInterval(timer);
        child.kill("SIGKILL");
        resolve();
      }
    }, 5);
    child.on("exit", () => (clearInterval(timer), reject(new Error(`study ended before the kill: ${stderr}`))));
  });
  await exited;
  assert.ok(existsSync(join(killed, "runs", RUNS[0].id, "result.json")), "the first run finished before the kill");
  assert.ok(!existsSync(join(killed, "runs", RUNS[3].id, "result.json")), "the kill came mid-study");
  const partial = await runAttnlipHere(["study", "--aggregate", killed]);
  assert.equal(partial.code, 0, partial.stderr);
  assert.match(partial.stdout, /note: [1-3] run\(s\) of the grid's 4 are not finished \(not started, running or stopped\): the statistics cover the [1-3] finished run\(s\) only/);
  const firstWritten = statSync(join(killed, "runs", RUNS[0].id, "result.json")).mtimeMs;
  const rerun = runAttnlip(["study", killed, "--workers", "1"]);
  assert.equal(rerun.code, 0, rerun.stderr);
  assert.match(rerun.stderr, /run 1\/4 mnist_vit-micro_lambda0_top2_max-log_seed0: finished earlier, skipped/);
  assert.equal(statSync(join(killed, "runs", RUNS[0].id, "result.json")).mtimeMs, firstWritten);
  for (const run of RUNS) assert.deepEqual(withoutSeconds(result(killed, run.id)), withoutSeconds(result(whole, run.id)), run.id);
  assert.match(rerun.stdout, /clean accuracy \(test split\)/);
  assert.match(rerun.stdout, /Δ lambda 0\.5/);

  // Another grid in the same folder is refused; --aggregate combines what is there.
  const other = await runAttnlipHere(["study", killed, ...FLAGS.slice(0, -2), "--steps", "4"]);
  assert.equal(other.code, 2);
  assert.match(other.stderr, /^attnlip: study: .* holds a study with another grid \(attack\.steps \(--steps\): 3 there, 4 here\); continue it without grid flags, or choose another folder\n$/);
  // Giving some of the grid's own flags again (seeds in another order) continues it.
  const same = await runAttnlipHere(["study", killed, "--seeds", "1,0", "--model", "vit-micro"]);
  assert.equal(same.code, 0, same.stderr);
  const agg = await runAttnlipHere(["study", "--aggregate", killed]);
  assert.equal(agg.code, 0, agg.stderr);
  assert.match(agg.stdout, /aggregated 4 finished run\(s\) into/);
  // A result.json damaged from outside stops a rerun at once, with one line that says how to rebuild it.
  writeFileSync(join(killed, "runs", RUNS[3].id, "result.json"), '{"format": "attnlip-study-run", "ver');
  const damaged = await runAttnlipHere(["study", killed]);
  assert.equal(damaged.code, 2);
  assert.match(damaged.stderr, /^attnlip: study: .*result\.json: not valid JSON \(.*\); remove it to rebuild the run's result from its files\n$/);
});

test("a vit-micro-l2 run: the dot-product variants, vacuous on L2 attention (Infinity, null in analysis.json), do not stop the study; l2-dist, l2-cov and kim are aggregated", async () => {
  const out = join(tempDir("attnlip-study-l2-"), "study");
  const grid = parseStudyGrid({ ...GRID, model: ["vit-micro-l2"], lambdas: [0], seeds: [0] }, "test");
  // (stdout is left alone here: replacing it would swallow the report of the test before.)
  const summary = await runStudy({ out, grid, backend: "wasm", workers: 1, progress: () => {}, log: () => {} });
  assert.equal(summary.finished, 1);
  const r = result(out, expandGrid(grid)[0].id);
  assert.equal(r.networkRatio.cov, null);
  for (const v of ["l2-dist", "l2-cov", "kim"]) assert.ok(r.networkRatio[v]! >= 1 - 1e-9, `${v}: ${r.networkRatio[v]}`);
  const metrics = summary.groups[0].lambdas[0].metrics;
  assert.equal(metrics["networkRatio:kim"]?.mean, r.networkRatio.kim);
  assert.equal(metrics["networkRatio:cov"], null);
  // The printed table and the report show the L2 variants and the composition floor, and say
  // why the dot-product variants have no value instead of listing them as "-".
  const printed = studyTable(summary);
  for (const row of ["median network bound/true, l2-dist", "median network bound/true, kim", "median composition floor"])
    assert.match(printed, new RegExp(row));
  assert.doesNotMatch(printed, /median network bound\/true, cov/);
  assert.match(printed, /note: no value for paper, .*cov.*fused.*: these bounds do not apply to vit-micro-l2's attention/);
  const html = await buildStudyReport(summary);
  assert.match(html, /median network bound\/true, kim/);
  assert.doesNotMatch(html, /median network bound\/true, fused/);
  assert.match(html, /no value for paper, .*: these bounds do not apply to vit-micro-l2&#39;s attention|no value for paper, .*: these bounds do not apply to vit-micro-l2's attention/);
});
