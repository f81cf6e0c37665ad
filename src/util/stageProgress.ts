/**
 * Progress lines for work where one input takes minutes (a BERT-base analysis): the stage, how
 * far it is (layer or block k of K), its time so far and the time it has left at its pace so
 * far, and after each input the time left for the remaining inputs. On a terminal, one line
 * on stderr rewritten in place; elsewhere (logs, CI) a plain line at most every 10 s and at the
 * end of each stage that took more than a few seconds.
 */

/** What a stage reports (src/analysis/analyze.ts StageProgress has these fields). */
export interface StageStep {
  stage: string;
  input: number;
  inputs: number;
  done: number;
  total: number;
  unit: string;
  name: string;
  /** Seconds the stage has taken so far at this input. */
  seconds: number;
}

/** "42 s", "3.5 min", "1.2 h". */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  if (seconds < 90) return `${Math.max(0, Math.round(seconds))} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/**
 * The line for one step, e.g. "input 1/1: bounds, layer 5/16 (blocks.3), 12 s, about 30 s left".
 *
 * @example stageLine({ stage: "bounds", input: 1, inputs: 1, done: 4, total: 16, unit: "layer", name: "blocks.2", seconds: 8 })
 * // "input 1/1: bounds, layer 4/16 (blocks.2), 8 s, about 24 s left in this stage"
 */
export function stageLine(p: StageStep): string {
  const left = p.done < p.total && p.done > 0 ? `, about ${duration((p.seconds / p.done) * (p.total - p.done))} left in this stage` : "";
  return `input ${p.input}/${p.inputs}: ${p.stage}, ${p.unit} ${p.done}/${p.total} (${p.name}), ${duration(p.seconds)}${left}`;
}

/**
 * A progress display for stages and inputs.
 *
 * @param who the command, before each plain line ("analyze").
 * @param options.interactive whether to rewrite one line in place (default: stderr is a terminal).
 * @param options.write where lines go (default stderr).
 * @param options.now a clock in seconds (default performance.now() / 1000; tests pass their own).
 * @example const progress = stageProgress("analyze"); analyze(model, x, { onStage: progress.onStage, onProgress: progress.onProgress }); progress.end();
 */
export function stageProgress(
  who: string,
  options: { interactive?: boolean; write?: (line: string) => void; now?: () => number } = {},
) {
  const interactive = options.interactive ?? process.stderr.isTTY === true;
  const write = options.write ?? ((line: string) => void process.stderr.write(line));
  const now = options.now ?? (() => performance.now() / 1000);
  const started = now();
  let lastPlain = started;
  let width = 0;
  const show = (line: string, important: boolean) => {
    if (interactive) {
      const padded = line.padEnd(width);
      width = line.length;
      write(`\r  ${padded}`);
    } else if (important || now() - lastPlain >= 10) {
      lastPlain = now();
      write(`${who}: ${line}\n`);
    }
  };
  return {
    onStage: (p: StageStep): void => show(stageLine(p), p.done === p.total && p.seconds >= 5),
    /** After each input: inputs done, and the time left for the rest at the pace so far. */
    onProgress: (done: number, total: number): void => {
      const took = now() - started;
      const left = done < total ? `, about ${duration((took / done) * (total - done))} left` : "";
      show(`analyzed ${done}/${total} inputs in ${duration(took)}${left}`, done === total || done % Math.max(1, Math.round(total / 4)) === 0);
    },
    /** Ends the in-place line (a newline on a terminal; nothing otherwise). */
    end: (): void => {
      if (interactive && width > 0) write("\n");
    },
  };
}
