import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { buildSync } from "esbuild";
import { Piscina } from "piscina";
import { unwrapReply, type TaskReply } from "./tasks.ts";

let sourceEntry: string | null | undefined;

/**
 * Every worker thread's entry module. The built package (dist/) has compiled handlers, which
 * worker.mjs loads. In a checkout, worker.mjs would load the TypeScript sources through tsx in
 * every thread, about 1 s of CPU each; instead the task handlers are bundled once per process
 * with esbuild (our sources in one file, packages left to node_modules) into
 * node_modules/.cache/attnlip/ (inside the package, so that node_modules resolves from there),
 * named by the bundle's hash. Where that cannot be written, worker.mjs is used.
 */
function workerEntry(): string {
  const viaTsx = new URL("./worker.mjs", import.meta.url).href;
  if (existsSync(new URL("./handlers.js", import.meta.url))) return viaTsx; // the built package
  if (sourceEntry === undefined) {
    try {
      const handlers = fileURLToPath(new URL("./handlers.ts", import.meta.url));
      const code = buildSync({
        stdin: {
          contents: `export { runTask as default } from ${JSON.stringify(handlers)};`,
          resolveDir: fileURLToPath(new URL(".", import.meta.url)),
          loader: "ts",
        },
        bundle: true,
        platform: "node",
        format: "esm",
        packages: "external",
        // tfjs's gradients (package.json's "#tfjs-gradients") stay a module of their own, named
        // by its file URL below: the bundle's folder has no package.json to map the name.
        external: ["#tfjs-gradients"],
        write: false,
        logLevel: "silent",
      }).outputFiles[0].text.replaceAll(
        '"#tfjs-gradients"',
        JSON.stringify(new URL("../../lib/tfjsGradients.node.mjs", import.meta.url).href),
      );
      const dir = fileURLToPath(new URL("../../node_modules/.cache/attnlip/", import.meta.url));
      const file = `${dir}worker-${createHash("sha256").update(code).digest("hex").slice(0, 16)}.mjs`;
      if (!existsSync(file)) {
        mkdirSync(dir, { recursive: true });
        const temporary = `${file}.${process.pid}.tmp`;
        writeFileSync(temporary, code);
        renameSync(temporary, file);
      }
      sourceEntry = pathToFileURL(file).href;
    } catch {
      sourceEntry = null;
    }
  }
  return sourceEntry ?? viaTsx;
}

/**
 * A pool of worker threads (piscina, a maintained pool: not hand-made), each with its own tfjs
 * backend and model copy, for work that splits into independent pieces (analysis of many
 * inputs). Tasks are registered by name (tasks.ts); worker.mjs is every thread's entry.
 */

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
      filename: workerEntry(),
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

/**
 * The values of slices run in parallel, in order; when any failed, the error of the earliest
 * failing slice (by its place in the list, not by which failed first), so that the error a
 * run reports does not depend on the worker count or on timing.
 *
 * @throws the first rejected slice's reason, once every slice has settled.
 * @example const parts = await inOrder(slices.map((s) => pool.run("analyze", s)));
 */
export async function inOrder<T>(slices: readonly Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(slices);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed !== undefined) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}
