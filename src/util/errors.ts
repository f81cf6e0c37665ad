/**
 * The one error class for bad user input (arguments, files, data): its message names the
 * argument and what was expected, and the CLI prints it as one line and exits with code 2.
 * Subclasses (CheckpointError, IdxError, TrainingDiverged, ...) say where it came from.
 *
 * @example throw new InputError(`--n: must be a positive integer, got "abc"`);
 */
export class InputError extends Error {
  override name = "InputError";
}

/** True for errors that the CLI reports as bad input (exit code 2, one line). */
export function isInputProblem(error: unknown): error is Error {
  return (
    error instanceof InputError ||
    error instanceof NonFiniteError ||
    (error instanceof Error && "code" in error && typeof error.code === "string" && /^E(NOENT|ACCES|ISDIR|NOTDIR|EXIST|ROFS|PERM|NOSPC)$/.test(error.code))
  );
}

/**
 * A computation met a NaN or an infinity that the inputs and weights produce (values that
 * overflow float32, e.g. weights scaled far beyond training): the user's model or data, not a
 * bug. A RangeError, so callers that test for one still do; the CLI reports it as bad input.
 */
export class NonFiniteError extends RangeError {
  override name = "NonFiniteError";
}

/** The one line the CLI prints for an error: no stack, no newlines. */
export function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  // One line, printable: file contents quoted in messages may hold control characters.
  return text
    .replace(/\s*\n\s*/g, " ")
    // eslint-disable-next-line no-control-regex -- replacing control characters is the point
    .replace(/[\u0000-\u001f\u007f\ufeff\ufffd]/g, "?")
    .trim();
}
