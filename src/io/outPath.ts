import { accessSync, constants, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { InputError } from "../util/errors.ts";

/**
 * Checks an output path before the work that fills it starts, so that an unusable --out is
 * refused in one line at once rather than after a long run (`EEXIST: file already exists,
 * mkdir ...` once the attack is done). Nothing is created: a run refused later for another
 * reason leaves no empty folder behind.
 */

/**
 * Refuses to replace earlier results silently: when any of `files` exists, an InputError
 * `WHO: FILE exists (...); give --force to replace it, or --out ... for a new one`.
 *
 * @param files the result files a command is about to write.
 * @param force the command's --force: replace them.
 * @param elsewhere what --out takes, for the message ("FILE" or "DIR").
 * @throws InputError naming the first file that exists.
 * @example refuseToReplace(["runs/a/attack.json"], false, "attack", "FILE")
 */
export function refuseToReplace(files: readonly string[], force: boolean, who: string, elsewhere: string): void {
  if (force) return;
  const there = files.find((f) => statOrNull(resolve(f))?.isFile() === true);
  if (there !== undefined)
    throw new InputError(
      `${who}: ${there} exists (an earlier result); give --force to replace it, or --out ${elsewhere} to write elsewhere`,
    );
}

/** What goes at the path: a file (attack.json) or a folder (analysis.json and analysis.csv, a checkpoint). */
export type OutKind = "file" | "folder";

/** The error code of a failed fs call ("ENOENT"), or undefined. */
function codeOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException).code;
}

/** stat, or null when nothing is at the path (or a file sits where a folder of it should be). */
function statOrNull(path: string) {
  try {
    return statSync(path);
  } catch (error) {
    const code = codeOf(error);
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw error;
  }
}

/**
 * Checks that `path` can be written later: a folder where a folder is wanted (or nothing, and
 * its nearest existing ancestor a writable folder, so that it can be created), a path that is
 * not a folder where a file is wanted, and nothing under a plain file.
 *
 * @param flag the flag that named the path, e.g. "--out".
 * @param who the command, first word of the message ("attack").
 * @throws InputError `WHO: FLAG: ...` naming the path and what is in the way.
 * @example checkOutPath("/tmp/afile/attack.json", "file", "--out", "attack")
 *   // throws `attack: --out: cannot create /tmp/afile/attack.json: /tmp/afile is a file, not a folder`
 */
export function checkOutPath(path: string, kind: OutKind, flag: string, who: string): void {
  const fail = (why: string) => new InputError(`${who}: ${flag}: ${why}`);
  if (path.trim() === "") throw fail("must not be empty");
  const target = resolve(path);
  const here = statOrNull(target);
  if (here !== null) {
    if (kind === "folder" && !here.isDirectory()) throw fail(`${path} is a file, not a folder`);
    if (kind === "file" && here.isDirectory()) throw fail(`${path} is a folder; give the path of a file`);
  }
  // The folder that must exist or be created, then its nearest existing ancestor.
  let folder = kind === "folder" ? target : dirname(target);
  let stat = statOrNull(folder);
  while (stat === null && dirname(folder) !== folder) {
    folder = dirname(folder);
    stat = statOrNull(folder);
  }
  if (stat === null) throw fail(`cannot create ${path}: no existing folder above it`);
  if (!stat.isDirectory()) throw fail(`cannot create ${path}: ${folder} is a file, not a folder`);
  try {
    accessSync(folder, constants.W_OK | constants.X_OK);
  } catch {
    throw fail(`cannot write ${path}: the folder ${folder} is not writable`);
  }
}
