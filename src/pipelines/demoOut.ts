import { existsSync, lstatSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { writeJsonAtomically } from "../io/atomicWrite.ts";
import { InputError } from "../util/errors.ts";
import type { DemoSettings } from "./demoSettings.ts";

/**
 * The demo's output folder: what it writes there, the mark that says a folder holds a demo's
 * results and with which settings, and the rule for replacing earlier results (never silently,
 * as every other command: --force, or the demo's own default folder holding an earlier demo with
 * the same settings).
 */

/** What the demo writes in its folder (run folders with a trailing slash). */
export const DEMO_OUTPUTS = [
  "baseline/",
  "jasmin/",
  "report.html",
  "summary.json",
  "demo.json",
] as const;

/** What a demo's results are: the settings, the seed and the second run's JaSMin weight. */
export interface DemoIdentity {
  settings: DemoSettings;
  seed: number;
  jasmin: number;
}

/** The demo's default folder for a task and size (the quick demo never shares the full one's). */
export function defaultDemoOut(task: "image" | "text", quick: boolean): string {
  return `runs/demo${task === "text" ? "-text" : ""}${quick ? "-quick" : ""}`;
}

/**
 * The identity of the demo that wrote `dir`: from its demo.json (written when a demo starts), or
 * for a folder of a demo from before demo.json, from summary.json's settings, seed and jasmin
 * run. Null when neither says (not the demo's, or unreadable).
 */
export function readDemoIdentity(dir: string): DemoIdentity | null {
  const read = (name: string): Record<string, unknown> | null => {
    try {
      const value: unknown = JSON.parse(readFileSync(join(dir, name), "utf8"));
      return typeof value === "object" && value !== null
        ? (value as Record<string, unknown>)
        : null;
    } catch {
      return null;
    }
  };
  const mark = read("demo.json");
  if (
    mark !== null &&
    mark.written_by === "attnlip demo" &&
    typeof mark.seed === "number" &&
    typeof mark.jasmin === "number"
  )
    return { settings: mark.settings as DemoSettings, seed: mark.seed, jasmin: mark.jasmin };
  const summary = read("summary.json");
  const runs = summary?.runs;
  const second = Array.isArray(runs)
    ? (runs as { name?: unknown; jasmin?: unknown }[]).find((r) => r?.name === "jasmin")
    : undefined;
  if (
    summary !== null &&
    typeof summary.settings === "object" &&
    typeof summary.seed === "number" &&
    typeof second?.jasmin === "number"
  )
    return {
      settings: summary.settings as DemoSettings,
      seed: summary.seed,
      jasmin: second.jasmin,
    };
  return null;
}

/** What differs between two identities, e.g. "seed 1 (now 0), epochs 1 (now 2)". */
function differences(was: DemoIdentity, now: DemoIdentity): string {
  const pairs: [string, unknown, unknown][] = [
    ...[...new Set([...Object.keys(now.settings), ...Object.keys(was.settings ?? {})])].map(
      (k): [string, unknown, unknown] => [
        k,
        (was.settings as unknown as Record<string, unknown>)?.[k],
        (now.settings as unknown as Record<string, unknown>)[k],
      ],
    ),
    ["seed", was.seed, now.seed],
    ["jasmin", was.jasmin, now.jasmin],
  ];
  return pairs
    .filter(([, a, b]) => !isDeepStrictEqual(a, b))
    .map(([k, a, b]) => `${k} ${JSON.stringify(a) ?? "absent"} (now ${JSON.stringify(b)})`)
    .join(", ");
}

/** Options of {@link prepareDemoOut}. */
export interface PrepareDemoOutOptions {
  /** The folder as the user named it (or the default), for messages. */
  out: string;
  /** What this run will be. */
  identity: DemoIdentity;
  /** --force: replace whatever the demo writes there. */
  force: boolean;
  /** `out` is the demo's default folder (no --out given). */
  ownFolder: boolean;
}

/**
 * Before the demo's work: refuses to replace earlier results silently, then clears the demo's
 * own paths and marks the folder as this demo's (demo.json).
 *
 * Nothing of the demo's ({@link DEMO_OUTPUTS}) in `out`: nothing to say. Otherwise the earlier
 * results are replaced, with one line saying so (returned), when --force was given, or when `out`
 * is the demo's default folder and holds an earlier demo with the same settings, seed and JaSMin
 * weight (its demo.json, or summary.json); else an InputError naming the folder, what is there,
 * --force and --out. Files the demo does not write are never touched.
 *
 * @returns the line to print when earlier results are replaced, else null.
 * @throws InputError `demo: runs/x already holds report.html, baseline/ (...); give --force to
 *   replace them, or --out DIR to write elsewhere`.
 * @example prepareDemoOut({ out: "runs/demo", identity, force: false, ownFolder: true }) // null in an empty folder
 */
export async function prepareDemoOut(options: PrepareDemoOutOptions): Promise<string | null> {
  const { out, identity, force, ownFolder } = options;
  refuseOddOutputs(out);
  const present = DEMO_OUTPUTS.filter((name) => existsSync(join(out, name)));
  let line: string | null = null;
  if (present.length > 0) {
    const listed = present.join(", ");
    if (force) line = `demo: --force: replacing ${listed} in ${out}`;
    else {
      const earlier = readDemoIdentity(out);
      const same = earlier !== null && isDeepStrictEqual(earlier, identity);
      if (same && ownFolder)
        line = `demo: replacing the earlier demo's results in ${out} (same settings, seed ${identity.seed} and JaSMin lambda ${identity.jasmin})`;
      else {
        const why = !ownFolder
          ? earlier !== null
            ? "an earlier demo's results"
            : "earlier results"
          : earlier !== null
            ? `an earlier demo with other settings: ${differences(earlier, identity)}`
            : "not written by attnlip demo";
        throw new InputError(
          `demo: ${out} already holds ${listed} (${why}); give --force to replace them, or --out DIR to write elsewhere`,
        );
      }
    }
    for (const name of present) rmSync(join(out, name), { recursive: true, force: true });
  }
  await writeJsonAtomically(join(out, "demo.json"), { written_by: "attnlip demo", ...identity });
  return line;
}

/**
 * Refuses, before anything is removed, a path of the demo's outputs that holds something of
 * another kind: a file or a symbolic link where the demo writes a folder (baseline/, jasmin/),
 * a folder or a link where it writes a file. --force replaced the demo's own earlier outputs;
 * these are not, and removing them half-way (then failing on mkdir) lost the rest.
 *
 * @throws InputError naming --out, the path and what is there.
 */
function refuseOddOutputs(out: string): void {
  for (const name of DEMO_OUTPUTS) {
    const folder = name.endsWith("/");
    const path = join(out, folder ? name.slice(0, -1) : name);
    let kind: string;
    try {
      const st = lstatSync(path);
      if (st.isSymbolicLink()) kind = "a symbolic link";
      else if (folder && !st.isDirectory()) kind = "a file";
      else if (!folder && st.isDirectory()) kind = "a folder";
      else continue;
    } catch {
      continue; // nothing there
    }
    throw new InputError(
      `demo: --out ${out}: ${path} is ${kind}, where the demo writes its ${folder ? "folder" : "file"} ${name}; move it away or give another --out (nothing was changed)`,
    );
  }
}
