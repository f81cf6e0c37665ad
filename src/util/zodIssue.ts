import type { z } from "zod";

/**
 * How attnlip words a zod validation issue of a JSON document (a config, a grid file, a
 * checkpoint's state): the field's path and the reason, e.g. `heads: expected a finite number,
 * got Infinity`. One place, so that every file a user hands over reads the same.
 *
 * zod's own wording is kept except for a non-finite number: JSON.parse reads a literal beyond
 * about 1.8e308 (`1e999`) as Infinity, which zod reports as "expected number, received
 * Infinity"; the message then says that a finite number was expected and why the file's
 * number became Infinity. And a list written as a string ("0,1", as a flag takes it) is told
 * how JSON writes a list.
 */

/** The value at `path` inside `root`, or undefined when the path leaves the document. */
export function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let v = root;
  for (const key of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

/**
 * The reason of one issue: zod's message, or for a non-finite number where a number was
 * expected, "expected a finite number, got Infinity (...)".
 *
 * @param issue one of a ZodError's issues.
 * @param root the document that was validated (to find the offending value).
 * @example issueReason(schema.safeParse(JSON.parse('{"n": 1e999}')).error!.issues[0], doc)
 *   // "expected a finite number, got Infinity (a JSON number beyond about 1.8e308 reads as Infinity)"
 */
export function issueReason(issue: z.ZodError["issues"][number], root: unknown): string {
  const value = valueAt(root, issue.path);
  if (issue.code === "invalid_type" && typeof value === "number" && !Number.isFinite(value))
    return `expected a finite number, got ${value}${Number.isNaN(value) ? "" : " (a JSON number beyond about 1.8e308 reads as Infinity)"}`;
  // A list written as a flag would take it ("0,1"): say how a JSON file writes it.
  if (issue.code === "invalid_type" && issue.expected === "array" && typeof value === "string")
    return `expected a JSON array such as [0, 1], got the string ${JSON.stringify(value)}`;
  return issue.message;
}

/**
 * `PATH: REASON` for the first issue of a failed validation, the path joined with dots or
 * "(root)".
 *
 * @example firstIssue(schema.safeParse(doc).error!, doc) // "optimizer.lr: Too small: expected number to be >0"
 */
export function firstIssue(error: z.ZodError, root: unknown): string {
  const issue = error.issues[0];
  return `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issueReason(issue, root)}`;
}
