import { existsSync } from "node:fs";
import { z } from "zod";
import { readJsonFile, validated } from "./jsonFile.ts";
import type { StudySummary } from "./aggregate.ts";

/**
 * A study whose results are committed with the repository (docs/results/study-*.json): the
 * aggregation (study.json) with how it was made, so that the demo can put the study's verdict
 * beside its own single-seed numbers and say which is which.
 */
export const CommittedStudySchema = z.looseObject({
  format: z.literal("attnlip-committed-study"),
  /** What the study is, in a few words (e.g. "text-tiny on SpamAssassin"). */
  what: z.string(),
  /** The page that presents it (docs/results/study-*.md). */
  page: z.string(),
  /** The exact command. */
  command: z.string(),
  /** Wall time in seconds, and the machine it ran on. */
  wallSeconds: z.number(),
  machine: z.string(),
  summary: z.looseObject({
    format: z.literal("attnlip-study"),
    finished: z.number().int(),
    groups: z.array(z.looseObject({ verdict: z.array(z.string()), lambdas: z.array(z.looseObject({ seeds: z.array(z.number()) })) })),
  }),
});

/** A committed study ({@link CommittedStudySchema}). */
export type CommittedStudy = z.output<typeof CommittedStudySchema> & { summary: StudySummary };

/**
 * Reads a committed study, or null when the file does not exist.
 *
 * @throws InputError when the file is not a committed study (the message names the field).
 * @example readCommittedStudy("docs/results/study-spam.json")?.summary.groups[0].verdict
 */
export function readCommittedStudy(path: string): CommittedStudy | null {
  if (!existsSync(path)) return null;
  return validated(CommittedStudySchema, readJsonFile(path, ""), path) as CommittedStudy;
}

/**
 * The lines that present a committed study's verdict beside a single run's numbers: what it
 * is and how large, then each verdict sentence.
 *
 * @example committedStudyLines(study) // ["text-tiny on SpamAssassin: 12 runs (3 seeds x 4 lambdas), ...", "JaSMin lowers ..."]
 */
export function committedStudyLines(study: CommittedStudy): string[] {
  const group = study.summary.groups[0];
  if (group === undefined) return [`${study.what}: no finished runs`];
  const seeds = new Set(group.lambdas.flatMap((l) => l.seeds)).size;
  return [
    `${study.what}: ${study.summary.finished} runs (${seeds} seeds x ${group.lambdas.length} lambdas), 95% intervals over seeds; ${study.page}`,
    ...group.verdict,
  ];
}
