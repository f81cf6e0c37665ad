// A study on a job scheduler (issue 37, part 6): the shard comes from Slurm's or Kubernetes'
// array index when --shard is absent; N processes over one folder, one killed mid-run and
// restarted, give the same study.json as one process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { shardFromScheduler } from "../../src/study/schedulerShard.ts";
import { runStudy } from "../../src/pipelines/studyRun.ts";
import { expandGrid, parseStudyGrid } from "../../src/study/grid.ts";
import { tempDir } from "../train/helpers.ts";

test("the shard comes from --shard, else SLURM_ARRAY_TASK_ID (from its MIN, of its COUNT or --shards), else JOB_COMPLETION_INDEX with --shards, else every run", () => {
  assert.equal(shardFromScheduler({}, {}), null);
  assert.deepEqual(shardFromScheduler({ shard: "2/3" }, { SLURM_ARRAY_TASK_ID: "0", SLURM_ARRAY_TASK_COUNT: "8" }), { k: 2, n: 3, from: "--shard" });
  assert.deepEqual(shardFromScheduler({}, { SLURM_ARRAY_TASK_ID: "0", SLURM_ARRAY_TASK_COUNT: "4", SLURM_ARRAY_TASK_MIN: "0" }), { k: 1, n: 4, from: "SLURM_ARRAY_TASK_ID=0" });
  assert.deepEqual(shardFromScheduler({}, { SLURM_ARRAY_TASK_ID: "4", SLURM_ARRAY_TASK_COUNT: "4", SLURM_ARRAY_TASK_MIN: "1" }), { k: 4, n: 4, from: "SLURM_ARRAY_TASK_ID=4" });
  assert.deepEqual(shardFromScheduler({ shards: "6" }, { SLURM_ARRAY_TASK_ID: "5" }), { k: 6, n: 6, from: "SLURM_ARRAY_TASK_ID=5" });
  assert.deepEqual(shardFromScheduler({ shards: "3" }, { JOB_COMPLETION_INDEX: "2" }), { k: 3, n: 3, from: "JOB_COMPLETION_INDEX=2" });
  const refused: [Parameters<typeof shardFromScheduler>[0], Record<string, string>, RegExp][] = [
    [{}, { SLURM_ARRAY_TASK_ID: "1" }, /SLURM_ARRAY_TASK_COUNT is not: give --shards N/],
    [{}, { SLURM_ARRAY_TASK_ID: "4", SLURM_ARRAY_TASK_COUNT: "4" }, /SLURM_ARRAY_TASK_ID=4 is shard 5 of 4: outside 1\.\.4/],
    [{}, { SLURM_ARRAY_TASK_ID: "2", SLURM_ARRAY_TASK_COUNT: "4", SLURM_ARRAY_TASK_STEP: "2" }, /SLURM_ARRAY_TASK_STEP is 2/],
    [{}, { SLURM_ARRAY_TASK_ID: "x", SLURM_ARRAY_TASK_COUNT: "4" }, /SLURM_ARRAY_TASK_ID: must be an integer >= 0, got "x"/],
    [{}, { JOB_COMPLETION_INDEX: "0" }, /JOB_COMPLETION_INDEX is set \(a Kubernetes Indexed Job\): give --shards N/],
    [{ shards: "2" }, { JOB_COMPLETION_INDEX: "2" }, /JOB_COMPLETION_INDEX=2 is shard 3 of 2/],
    [{ shards: "0" }, { JOB_COMPLETION_INDEX: "0" }, /--shards: must be a positive integer, got "0"/],
    [{ shards: "2" }, {}, /--shards N needs a job array index/],
    [{ shard: "1/2", shards: "2" }, {}, /--shard k\/n and --shards N cannot be given together/],
  ];
  for (const [flags, env, message] of refused)
    assert.throws(() => shardFromScheduler(flags, env), (e: Error) => e.name === "InputError" && message.test(e.message) && e.message.startsWith("study: "), JSON.stringify([flags, env]));
});

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));
/** 1 seed x 2 lambdas, sized to run in seconds. */
const FLAGS = [
  "--model", "vit-micro", "--lambdas", "0,0.5", "--seeds", "3", "--epochs", "2", "--train-size", "64", "--test-limit", "100",
  "--analyze-n", "1", "--iterations", "5", "--attack-n", "4", "--eps-linf", "0.05", "--eps-l2", "0.5", "--steps", "2", "--workers", "1",
];
const GRID = parseStudyGrid(
  {
    model: ["vit-micro"], lambdas: [0, 0.5], seeds: [3],
    train: { epochs: 2, trainSize: 64, testLimit: 100 }, analyze: { n: 1, iterations: 5 },
    attack: { n: 4, linf: [0.05], l2: [0.5], steps: 2 },
  },
  "test",
);

/** Starts shard `index` (0-based) of 2 as Slurm would; resolves with its exit code and stderr. */
function slurmShard(out: string, index: number, onStart?: (kill: () => void) => void): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [bin, "study", out, ...FLAGS], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, SLURM_ARRAY_TASK_ID: String(index), SLURM_ARRAY_TASK_COUNT: "2", SLURM_ARRAY_TASK_MIN: "0" },
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  onStart?.(() => child.kill("SIGKILL"));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stderr })));
}

test("a Slurm array of 2 over one folder, shard 2 killed mid-run and restarted, gives the study.json of one process", async () => {
  const [first, second] = expandGrid(GRID);
  const array = join(tempDir("attnlip-study-array-"), "study");
  // Shard 2 (the lambda 0.5 run) is killed once its run has a checkpoint, while shard 1 goes on.
  const mark = join(array, "runs", second.id, "train_state.json");
  let killedMidRun = false;
  const runs = [
    slurmShard(array, 0),
    slurmShard(array, 1, (kill) => {
      const timer = setInterval(() => {
        if (existsSync(mark)) {
          clearInterval(timer);
          killedMidRun = !existsSync(join(array, "runs", second.id, "result.json"));
          kill();
        }
      }, 20);
    }),
  ];
  const [one, killed] = await Promise.all(runs);
  assert.equal(one.code, 0, one.stderr);
  assert.match(one.stderr, /^study: shard 1\/2 \(SLURM_ARRAY_TASK_ID=0\)$/m);
  assert.equal(killed.code, null, "shard 2 was killed");
  assert.ok(killedMidRun, "the kill came before shard 2's run finished");
  assert.ok(existsSync(join(array, "runs", first.id, "result.json")));
  // The scheduler restarts the killed task: it resumes its run from the saved checkpoint.
  const again = await slurmShard(array, 1);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /study \(shard 2\/2\): run 1\/1 .*lambda0\.5.* done in/);

  const single = join(tempDir("attnlip-study-single-"), "study");
  const write = process.stdout.write;
  process.stdout.write = (() => true) as typeof process.stdout.write;
  try {
    await runStudy({ out: single, grid: GRID, backend: "wasm", workers: 1, progress: () => {}, log: () => {} });
  } finally {
    process.stdout.write = write;
  }
  const study = (dir: string) => JSON.parse(readFileSync(join(dir, "study.json"), "utf8")) as { finished: number; groups: unknown };
  assert.equal(study(array).finished, 2);
  assert.deepEqual(study(array).groups, study(single).groups);
});

test("docs/cluster.md's sbatch script and Indexed Job run the same study: consecutive array ids or --shards equal to completions, no --shard, the same grid flags", () => {
  const doc = readFileSync(fileURLToPath(new URL("../../docs/cluster.md", import.meta.url)), "utf8");
  const sbatch = /```sh\n(#!\/bin\/bash[\s\S]*?)```/.exec(doc)?.[1];
  const yaml = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(sbatch && yaml, "both job files are in the page");
  const array = /#SBATCH --array=0-(\d+)\n/.exec(sbatch);
  assert.ok(array, "a Slurm array of consecutive ids from 0");
  const slurmFlags = sbatch.slice(sbatch.indexOf("attnlip study")).replace(/\\\n/g, " ").split("\n")[0].trim().split(/\s+/).slice(3);
  const completions = Number(/completions: (\d+)/.exec(yaml)?.[1]);
  assert.match(yaml, /completionMode: Indexed/);
  const command = /command: \[([\s\S]*?)\]\n/.exec(yaml)?.[1];
  assert.ok(command);
  const k8sFlags = [...command.matchAll(/"([^"]*)"/g)].map((m) => m[1]).slice(3);
  const shards = k8sFlags.indexOf("--shards");
  assert.equal(Number(k8sFlags[shards + 1]), completions, "--shards equals the Job's completions");
  for (const flags of [slurmFlags, k8sFlags]) assert.ok(!flags.includes("--shard"), "no --shard: the scheduler's index decides");
  // The same grid in both (the workers flag and --shards aside).
  const grid = (flags: string[]) => {
    const pairs: string[] = [];
    for (let i = 0; i < flags.length; i += 2) if (flags[i] !== "--workers" && flags[i] !== "--shards") pairs.push(`${flags[i]} ${flags[i + 1]}`);
    return pairs.sort();
  };
  assert.deepEqual(grid(slurmFlags), grid(k8sFlags));
  assert.ok(grid(slurmFlags).includes("--attack autoattack"));
});
