import { InputError } from "../util/errors.ts";

/**
 * Tasks that run in worker threads, found by name: each is a handler registered in the worker
 * (handlers.ts) and called by the pool (pool.ts) with a payload that structured clone can
 * carry (typed arrays, plain objects, SharedArrayBuffers). Errors come back as values, so the
 * main thread can rethrow a user error (InputError) as one, with its message.
 */

/** One kind of task. */
export interface TaskSpec<P = unknown, R = unknown> {
  /** The name the main thread asks for. */
  name: string;
  /** Runs one task in the worker; may be async. */
  run(payload: P): R | Promise<R>;
}

/** What a worker sends back. */
export type TaskReply =
  | { ok: true; value: unknown }
  | { ok: false; error: { name: string; message: string; userError: boolean } };

const TASKS = new Map<string, TaskSpec>();

/**
 * Registers a task in this thread.
 *
 * @throws Error when the name is taken.
 * @example registerTask({ name: "echo", run: (x) => x })
 */
export function registerTask<P, R>(spec: TaskSpec<P, R>): void {
  if (TASKS.has(spec.name)) throw new Error(`registerTask: "${spec.name}" is already registered`);
  TASKS.set(spec.name, spec as TaskSpec);
}

/**
 * Runs the task `request.name` on `request.payload`, catching what it throws.
 *
 * @returns the value, or the error's name and message (userError: an InputError).
 * @example await runRegisteredTask({ name: "echo", payload: 1 }) // { ok: true, value: 1 }
 */
export async function runRegisteredTask(request: { name: string; payload: unknown }): Promise<TaskReply> {
  const spec = TASKS.get(request.name);
  if (spec === undefined)
    return { ok: false, error: { name: "Error", message: `worker: no task "${request.name}" is registered`, userError: false } };
  try {
    return { ok: true, value: await spec.run(request.payload) };
  } catch (e) {
    const error = e instanceof Error ? e : new Error(String(e));
    return { ok: false, error: { name: error.name, message: error.message, userError: e instanceof InputError } };
  }
}

/**
 * The value of a reply, or its error rethrown in this thread: an InputError for a user error
 * (one line on the command line), otherwise an Error naming the worker.
 *
 * @throws InputError or Error as described.
 */
export function unwrapReply<R>(reply: TaskReply): R {
  if (reply.ok) return reply.value as R;
  if (reply.error.userError) throw new InputError(reply.error.message);
  const error = new Error(`in a worker: ${reply.error.message}`);
  error.name = reply.error.name;
  throw error;
}
