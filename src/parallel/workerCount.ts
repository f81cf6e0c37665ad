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
