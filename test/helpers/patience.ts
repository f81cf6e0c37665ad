/**
 * Time limits in tests catch hangs; they do not measure speed. A test that takes 63 s alone took
 * 252 s at load 15 and failed on a fixed 240 s limit, and the runner said only "cancelled 1".
 * So: a step that keeps making progress (prints something, finishes a command) is never stopped,
 * one that makes none for {@link HANG_MS} is taken as hung, and the failure names the step.
 */

/**
 * How long a step may go without progress before it counts as hung: 10 minutes, about ten times
 * the longest silence of any step here alone (a browser loading a page, a quick demo's training),
 * so that a busy machine never trips it.
 */
export const HANG_MS = 10 * 60_000;

/**
 * A backstop for a whole test whose own steps have limits of their own (a browser test's waits):
 * long enough that a slow but progressing run always finishes, so it only ends a hang that
 * nothing else caught (node:test reports it as cancelled, with the test's name).
 */
export const TEST_BACKSTOP_MS = 3 * HANG_MS;

/** What {@link watchdog} returns. */
export interface Watchdog {
  /** Call on every sign of progress (output, a finished step): the clock starts again. */
  progress(): void;
  /** Rejects with `describe()`'s words once no progress came for `idleMs`; never resolves. */
  hung: Promise<never>;
  /** Stops the clock (call when the work is done, pass or fail). */
  stop(): void;
}

/**
 * A progress-based time limit: `hung` rejects with an Error whose message is `describe(seconds)`
 * when `progress()` has not been called for `idleMs`. Race the work against it:
 * `await Promise.race([work, dog.hung])`, then `dog.stop()`.
 *
 * @param describe what was running and where, for the error (given the idle seconds).
 * @param idleMs the longest time without progress [HANG_MS].
 * @example const dog = watchdog((s) => `attnlip demo printed nothing for ${s} s`);
 */
export function watchdog(describe: (idleSeconds: number) => string, idleMs = HANG_MS): Watchdog {
  let last = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setInterval(
      () => {
        if (Date.now() - last < idleMs) return;
        clearInterval(timer);
        reject(new Error(describe(idleMs / 1000)));
      },
      Math.min(5_000, idleMs),
    );
    timer.unref();
  });
  hung.catch(() => {}); // a rejection nobody raced is not an unhandled one
  return {
    progress: () => {
      last = Date.now();
    },
    hung,
    stop: () => clearInterval(timer),
  };
}
