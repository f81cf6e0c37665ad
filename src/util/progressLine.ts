/**
 * Progress of a long CLI step on stderr: one line rewritten in place on a terminal, and plain
 * lines at each quarter (and at the end) when stderr is not a terminal (logs, CI).
 *
 * @param label word before the counter on a terminal, e.g. "input" -> "  input 3/16".
 * @param plain the plain line for (done, total), e.g. "  analyzed 3/16 inputs".
 */
export function progressLine(label: string, plain: (done: number, total: number) => string) {
  const interactive = process.stderr.isTTY;
  return {
    onProgress: (done: number, total: number): void => {
      if (interactive) process.stderr.write(`\r  ${label} ${done}/${total}`);
      else if (done === total || done % Math.max(1, Math.round(total / 4)) === 0) console.error(plain(done, total));
    },
    /** Ends the in-place line (a newline on a terminal; nothing otherwise). */
    end: (): void => {
      if (interactive) process.stderr.write("\n");
    },
  };
}
