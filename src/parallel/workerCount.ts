import { availableParallelism } from "node:os";
import { InputError } from "../util/errors.ts";
import { describeNumberRule, flagError, readNumber } from "../util/numberFlag.ts";

// How many worker threads a command uses. Kept apart from pool.ts so that commands can check
// the count (and ATTNLIP_WORKERS) before loading anything heavy.

/**
 * The default number of workers: ATTNLIP_WORKERS when set (an integer from 1 to 256; the test
 * runner sets 1 so that small runs do not each start a pool), else the cores this process may
 * use.
 *
 * @throws InputError `ATTNLIP_WORKERS: must be an integer from 1 to 256 (or unset: the number
 *   of cores), got "TEXT"` when it is set to anything else (empty or blanks count as unset).
 * @example defaultWorkers() // 2 on a 2-core machine
 */
export function defaultWorkers(): number {
  const env = process.env.ATTNLIP_WORKERS;
  if (env === undefined || env.trim() === "") return availableParallelism();
  const value = readNumber(env, WORKER_RULE);
  if (value === null) throw flagError("", "ATTNLIP_WORKERS", `must be ${describeNumberRule(WORKER_RULE)} (or unset: the number of cores)`, env);
  return value;
}

const WORKER_RULE = { integer: true, min: 1, max: 256 };

/**
 * Checks a worker count.
 *
 * @throws InputError `WHO: --workers: must be an integer from 1 to 256, got X`.
 * @example checkWorkers(2, "analyze") // 2
 */
export function checkWorkers(workers: number, who: string): number {
  if (!Number.isInteger(workers) || workers < 1 || workers > 256)
    throw new InputError(`${who}${who === "ATTNLIP_WORKERS" ? "" : ": --workers"}: must be an integer from 1 to 256, got ${workers}`);
  return workers;
}

/**
 * The warning for a worker count above the cores this process may use, or null when it fits.
 * More workers than cores only compete for the same cores (measured on 2 cores: 64 workers on
 * a batch of 16 took 45-59 s where 2 took 6.6 s), and each holds its own model copy.
 *
 * @param workers the worker count a command will use.
 * @param who the command, first word of the message.
 * @param source where the count came from: "--workers" (default) or "ATTNLIP_WORKERS".
 * @param cores the cores available (default: `availableParallelism()`).
 * @example oversubscriptionWarning(64, "train", "--workers", 2)
 *   // "train: warning: --workers 64 is more than the 2 cores of this machine: ..."
 */
export function oversubscriptionWarning(
  workers: number,
  who: string,
  source: "--workers" | "ATTNLIP_WORKERS" = "--workers",
  cores: number = availableParallelism(),
): string | null {
  if (workers <= cores) return null;
  const asked = source === "--workers" ? `--workers ${workers}` : `ATTNLIP_WORKERS=${workers}`;
  return `${who}: warning: ${asked} is more than the ${cores} cores of this machine: the workers share the cores and each holds a model copy, so this is slower than ${cores} workers`;
}
