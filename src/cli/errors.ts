import { InputError } from "../softmax/parse.ts";

/**
 * An error caused by the user's input (arguments, files): the CLI prints its message as one
 * line and exits with code 2.
 */
export class UsageError extends Error {
  override name = "UsageError";
}

/** True for errors that the CLI reports as bad input (exit code 2, one line). */
export function isInputProblem(error: unknown): error is Error {
  return (
    error instanceof UsageError ||
    error instanceof InputError ||
    (error instanceof Error && "code" in error && typeof error.code === "string" && /^E(NOENT|ACCES|ISDIR|NOTDIR|EXIST|ROFS|PERM|NOSPC)$/.test(error.code))
  );
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
