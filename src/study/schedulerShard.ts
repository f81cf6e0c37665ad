import { InputError } from "../util/errors.ts";
import { parseShard } from "./grid.ts";

/** Which shard of a study this process runs, and where that came from. */
export interface ShardChoice {
  /** 1-based shard k of n. */
  k: number;
  n: number;
  /** "--shard", "SLURM_ARRAY_TASK_ID=3" or "JOB_COMPLETION_INDEX=3". */
  from: string;
}

/**
 * The shard of a study this process runs: `--shard k/n` when given; else the job array's index
 * from the scheduler's environment: Slurm's `SLURM_ARRAY_TASK_ID` (k = id - SLURM_ARRAY_TASK_MIN
 * + 1 of n = SLURM_ARRAY_TASK_COUNT, or of `--shards N`; an array with a step other than 1 is
 * refused, since its ids would leave shards out), or a Kubernetes Indexed Job's
 * `JOB_COMPLETION_INDEX` (0-based; n from `--shards N`, which Kubernetes does not export);
 * else none: every run. docs/cluster.md has the job files.
 *
 * @param flags.shard the `--shard` text; flags.shards the `--shards` text.
 * @param env the environment [process.env].
 * @returns the shard, or null for every run.
 * @throws InputError naming the flag or variable: a bad --shard, --shards not a positive
 *   integer, --shards without an array index, both --shard and --shards, an index outside
 *   [0, n), a Slurm array without a count or with a step.
 * @example shardFromScheduler({ shards: "4" }, { JOB_COMPLETION_INDEX: "2" }) // { k: 3, n: 4, from: "JOB_COMPLETION_INDEX=2" }
 */
export function shardFromScheduler(
  flags: { shard?: string; shards?: string },
  env: Readonly<Record<string, string | undefined>> = process.env,
): ShardChoice | null {
  const shards = flags.shards === undefined ? undefined : positive(flags.shards, "--shards");
  if (flags.shard !== undefined) {
    if (shards !== undefined)
      throw new InputError("study: --shard k/n and --shards N cannot be given together (--shards is for a job array whose index the scheduler sets)");
    return { ...parseShard(flags.shard), from: "--shard" };
  }
  const slurm = env.SLURM_ARRAY_TASK_ID;
  if (slurm !== undefined && slurm !== "") {
    const id = index(slurm, "SLURM_ARRAY_TASK_ID");
    const min = env.SLURM_ARRAY_TASK_MIN === undefined ? 0 : index(env.SLURM_ARRAY_TASK_MIN, "SLURM_ARRAY_TASK_MIN");
    const step = env.SLURM_ARRAY_TASK_STEP;
    if (step !== undefined && step !== "" && step !== "1")
      throw new InputError(`study: SLURM_ARRAY_TASK_STEP is ${step}: give the job array consecutive ids (--array=0-N), or give each job --shard k/n`);
    const count = env.SLURM_ARRAY_TASK_COUNT;
    const n = shards ?? (count === undefined || count === "" ? undefined : positive(count, "SLURM_ARRAY_TASK_COUNT"));
    if (n === undefined)
      throw new InputError("study: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not: give --shards N (the array's size)");
    return within(id - min, n, `SLURM_ARRAY_TASK_ID=${slurm}`);
  }
  const k8s = env.JOB_COMPLETION_INDEX;
  if (k8s !== undefined && k8s !== "") {
    if (shards === undefined)
      throw new InputError("study: JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job): give --shards N, the Job's completions");
    return within(index(k8s, "JOB_COMPLETION_INDEX"), shards, `JOB_COMPLETION_INDEX=${k8s}`);
  }
  if (shards !== undefined)
    throw new InputError("study: --shards N needs a job array index (SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX) in the environment; to run one shard by hand give --shard k/n");
  return null;
}

function positive(text: string, name: string): number {
  const v = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!(Number.isSafeInteger(v) && v >= 1)) throw new InputError(`study: ${name}: must be a positive integer, got "${text}"`);
  return v;
}

function index(text: string, name: string): number {
  const v = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(v)) throw new InputError(`study: ${name}: must be an integer >= 0, got "${text}"`);
  return v;
}

function within(zeroBased: number, n: number, from: string): ShardChoice {
  if (zeroBased < 0 || zeroBased >= n)
    throw new InputError(`study: ${from} is shard ${zeroBased + 1} of ${n}: outside 1..${n} (is --shards or the array's size right?)`);
  return { k: zeroBased + 1, n, from };
}
