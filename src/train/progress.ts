import cliProgress from "cli-progress";

/**
 * Progress display of a training run: a cli-progress bar on a terminal (steps, loss,
 * accuracy, img/s or examples/s, ETA), plain lines otherwise (about one per 10% of an epoch), or nothing.
 */

/** How to show progress: "auto" = a bar when stdout is a TTY, lines otherwise. */
export type ProgressMode = "auto" | "bar" | "lines" | "none";

/** What a progress update shows. */
export interface ProgressValues {
  /** Mean training loss of the epoch so far. */
  loss: number;
  /** Training accuracy of the epoch so far, in [0, 1]. */
  accuracy: number;
  /** Training throughput of the epoch so far, examples (images or texts) per second. */
  imagesPerSecond: number;
  /** The throughput's unit as shown: "img/s" (images, the default) or "examples/s" (text). */
  unit?: string;
}

/** A progress display: one epoch at a time. */
export interface ProgressReporter {
  /** Starts epoch `epoch` (1-based) of `epochs`, with `steps` steps. */
  startEpoch(epoch: number, epochs: number, steps: number): void;
  /** `done` steps of the current epoch are complete. */
  update(done: number, values: ProgressValues): void;
  /** Ends the current epoch's display (before printing epoch results). */
  endEpoch(): void;
  /** Prints a line (between bars). */
  log(line: string): void;
}

function formatEta(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  if (seconds < 90) return `${Math.round(seconds)}s`;
  return `${Math.floor(seconds / 60)}m${String(Math.round(seconds % 60)).padStart(2, "0")}s`;
}

/**
 * Creates a reporter.
 *
 * @param mode see {@link ProgressMode}.
 * @param write prints one line (default console.log); used by "lines" mode and log().
 */
export function createProgress(mode: ProgressMode, write: (line: string) => void = console.log): ProgressReporter {
  const resolved = mode === "auto" ? (process.stdout.isTTY ? "bar" : "lines") : mode;
  if (resolved === "bar") return barReporter(write);
  let epochText = "";
  let steps = 0;
  let nextMark = 0;
  let started = 0;
  return {
    startEpoch(epoch, epochs, n) {
      epochText = `epoch ${epoch}/${epochs}`;
      steps = n;
      nextMark = 1;
      started = performance.now();
    },
    update(done, v) {
      if (resolved === "none" || steps === 0) return;
      // One line each time another tenth of the epoch is complete (and at its end).
      if (done * 10 < nextMark * steps && done !== steps) return;
      while (nextMark * steps <= done * 10) nextMark++;
      const elapsed = (performance.now() - started) / 1000;
      const eta = done > 0 ? (elapsed * (steps - done)) / done : NaN;
      write(
        `${epochText} step ${done}/${steps} (${Math.round((100 * done) / steps)}%) loss ${v.loss.toFixed(4)} ` +
          `acc ${(100 * v.accuracy).toFixed(1)}% ${v.imagesPerSecond.toFixed(1)} ${v.unit ?? "img/s"} ETA ${formatEta(eta)}`,
      );
    },
    endEpoch() {},
    log(line) {
      if (resolved !== "none") write(line);
    },
  };
}

/**
 * What the bar turned off on the terminal (the cursor, line wrapping), turned back on when the
 * process exits while a bar is running (Ctrl-C exits from its handler: the bar's own stop never
 * runs, and the user's shell was left with a hidden cursor and no line wrapping).
 */
function restoreTerminal(): void {
  process.stdout.write("\u001b[?25h\u001b[?7h");
}

function barReporter(write: (line: string) => void): ProgressReporter {
  let bar: cliProgress.SingleBar | null = null;
  return {
    startEpoch(epoch, epochs, steps) {
      process.once("exit", restoreTerminal);
      bar = new cliProgress.SingleBar(
        {
          format:
            "epoch {epoch} |{bar}| {value}/{total} steps | loss {loss} | acc {acc} | {ips} | ETA {eta_formatted}",
          stream: process.stdout,
          hideCursor: true,
          etaBuffer: 20,
        },
        cliProgress.Presets.shades_classic,
      );
      bar.start(steps, 0, { epoch: `${epoch}/${epochs}`, loss: "-", acc: "-", ips: "- /s" });
    },
    update(done, v) {
      bar?.update(done, {
        loss: v.loss.toFixed(4),
        acc: `${(100 * v.accuracy).toFixed(1)}%`,
        ips: `${v.imagesPerSecond.toFixed(1)} ${v.unit ?? "img/s"}`,
      });
    },
    endEpoch() {
      bar?.stop();
      bar = null;
      process.off("exit", restoreTerminal);
    },
    log(line) {
      write(line);
    },
  };
}
