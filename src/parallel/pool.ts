import { availableParallelism } from "node:os";
import { Piscina } from "piscina";
import { InputError } from "../util/errors.ts";
import { unwrapReply, type TaskReply } from "./tasks.ts";

/**
 * A pool of worker threads (piscina, a maintained pool: not hand-made), each with its own tfjs
 * backend and model copy, for work that splits into independent pieces (analysis of many
 * inputs). Tasks are registered by name (tasks.ts); worker.mjs is every thread's entry.
 */

/**
 * The default number of workers: ATTNLIP_WORKERS when set (an integer from 1 to 256; the test
 * runner sets 1 so that small runs do not each start a pool), else the cores this process may
 * use.
 *
 * @throws InputError when ATTNLIP_WORKERS is set to anything else.
 * @example defaultWorkers() // 2 on a 2-core machine
 */
export function defaultWorkers(): number {
  const env = process.env.ATTNLIP_WORKERS;
  if (env === undefined || env === "") return availableParallelism();
  return checkWorkers(Number(env), "ATTNLIP_WORKERS");
}

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
 * A fixed-size pool of worker threads; close it when done (workers hold tfjs backends).
 *
 * @example
 *   const pool = new WorkerPool(2);
 *   try { await pool.run("analyze", task); } finally { await pool.close(); }
 */
export class WorkerPool {
  private readonly pool: Piscina;

  /** @param threads worker threads, started at once (>= 1). */
  constructor(readonly threads: number) {
    this.pool = new Piscina({
      filename: new URL("./worker.mjs", import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: 60_000,
    });
  }

  /**
   * Runs the registered task `name` in a free worker.
   *
   * @returns the task's value.
   * @throws InputError when the task threw one (bad input in its slice); Error otherwise.
   */
  async run<R>(name: string, payload: unknown): Promise<R> {
    const reply = (await this.pool.run({ name, payload })) as TaskReply;
    return unwrapReply<R>(reply);
  }

  /** Stops every worker (pending tasks are rejected). */
  async close(): Promise<void> {
    await this.pool.close({ force: true });
  }
}
