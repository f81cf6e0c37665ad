import { join } from "node:path";
import { stringify } from "csv-stringify/sync";
import { median } from "simple-statistics";
import { z } from "zod";
import { SplitSchema } from "../robustness/attackFile.ts";
import { writeFileAtomically, writeJsonAtomically } from "../io/atomicWrite.ts";

/**
 * certify.json and certify.csv, described once: `runCertify` validates what it writes against
 * {@link CertifyFileSchema}, and the report reads certify.json with the same schema (no tfjs
 * here). A radius that no bound limits (the network is constant near the input) is written as
 * null; every other number is finite.
 */

/** A radius, or null for "every radius" (L(x, r) = 0). */
const Radius = z.number().min(0).nullable();

/** One rule's figures for one input (certify.ts RuleCertificate). */
const RuleSchema = z.looseObject({
  /** Certified radius in the file's norm (null: unbounded). */
  radius: Radius,
  /** L(x, 0) (null where it overflowed float64). */
  lipschitzAtZero: z.number().nullable(),
  /** L(x, r) at each radius of `radii` (null where it overflowed float64). */
  lipschitz: z.array(z.number().nullable()),
  /** Certified at each radius of `radii`. */
  certified: z.array(z.boolean()),
  /** Evaluations of L in the bisection. */
  evaluations: z.number().int().min(0),
});

/** One input's record. */
export const CertifiedInputSchema = z.looseObject({
  /** Position in the evaluated split (0-based). */
  index: z.number().int().min(0),
  label: z.number().int().min(0),
  prediction: z.number().int().min(0),
  correct: z.boolean(),
  /** Predicted logit minus the largest other one (float64 forward pass). */
  margin: z.number(),
  /** Distribution-aware ("dist") and prior-art ("half": softmax norm 1/2) figures. */
  dist: RuleSchema,
  half: RuleSchema,
});

/** Certified accuracy at one radius: inputs correctly classified and certified there, as a share. */
export const CertifiedAccuracySchema = z.looseObject({
  radius: z.number().min(0),
  dist: z.number().min(0).max(1),
  half: z.number().min(0).max(1),
});

/** certify.json. */
export const CertifyFileSchema = z.looseObject({
  model: z.record(z.string(), z.unknown()).optional(),
  source: z.string().optional(),
  data: z.string().optional(),
  split: SplitSchema.optional(),
  /** Inputs certified. */
  n: z.number().int().min(0),
  norm: z.enum(["l2", "linf"]),
  /** "image" (pixels) or "embedding" (token embeddings). */
  inputSpace: z.enum(["image", "embedding"]),
  /** Units of the radii: "input" (pixels) or "embedding". */
  units: z.string(),
  radii: z.array(z.number().min(0)),
  seed: z.number().optional(),
  cleanAccuracy: z.number().min(0).max(1),
  /** How the bound is made, in words (docs/math.md section 7). */
  method: z.record(z.string(), z.string()),
  summary: z.looseObject({
    /** Median certified radius over the correctly classified inputs (null: none, or unbounded). */
    medianRadius: z.looseObject({ dist: Radius, half: Radius }),
    /** Median over the correctly classified inputs of radius(dist) / radius(half) (null: none). */
    medianFactor: z.number().nullable(),
    certifiedAccuracy: z.array(CertifiedAccuracySchema),
  }),
  inputs: z.array(CertifiedInputSchema),
  seconds: z.number().min(0),
});

/** certify.json as read back. */
export type CertifyFile = z.output<typeof CertifyFileSchema>;
/** One input of certify.json. */
export type CertifiedInput = z.output<typeof CertifiedInputSchema>;

/** The radius columns' header text: "r=0.01". */
function at(r: number): string {
  return `r=${r}`;
}

/**
 * certify.csv: one row per input (index, label, prediction, correct, margin, each rule's
 * certified radius and L(x, 0), then per radius of `radii` each rule's L and whether the
 * prediction is certified there, 0/1; that radius's certified accuracy is the mean of
 * correct x certified).
 *
 * @example certifyCsv(doc).split("\n")[0] // "index,label,prediction,correct,margin,radius_dist,..."
 */
export function certifyCsv(doc: CertifyFile): string {
  const rules = ["dist", "half"] as const;
  const header = [
    "index",
    "label",
    "prediction",
    "correct",
    "margin",
    ...rules.map((r) => `radius_${r}`),
    ...rules.map((r) => `lipschitz_at_0_${r}`),
    ...doc.radii.flatMap((r) => rules.map((rule) => `lipschitz_${rule}_${at(r)}`)),
    ...doc.radii.flatMap((r) => rules.map((rule) => `certified_${rule}_${at(r)}`)),
  ];
  const cell = (v: number | null) => (v === null ? "" : v);
  const rows = doc.inputs.map((x) => [
    x.index,
    x.label,
    x.prediction,
    x.correct ? 1 : 0,
    x.margin,
    ...rules.map((r) => (x[r].radius === null ? "inf" : x[r].radius)),
    ...rules.map((r) => cell(x[r].lipschitzAtZero)),
    ...doc.radii.flatMap((_, k) => rules.map((r) => cell(x[r].lipschitz[k]))),
    ...doc.radii.flatMap((_, k) => rules.map((r) => (x[r].certified[k] ? 1 : 0))),
  ]);
  return stringify([header, ...rows]);
}

/**
 * Writes DIR/certify.json and DIR/certify.csv atomically (the folder is created).
 *
 * @returns their paths.
 * @throws ZodError when the document does not match {@link CertifyFileSchema} (a bug, not input).
 */
export async function writeCertifyFiles(dir: string, doc: CertifyFile): Promise<string[]> {
  CertifyFileSchema.parse(doc);
  const json = join(dir, "certify.json");
  const csv = join(dir, "certify.csv");
  await writeJsonAtomically(json, doc);
  await writeFileAtomically(csv, certifyCsv(doc));
  return [json, csv];
}

/** The files certify writes in its --out folder. */
export const CERTIFY_FILES = ["certify.json", "certify.csv"] as const;

/** A number for JSON: finite, or null. */
const finiteOrNull = (v: number) => (Number.isFinite(v) ? v : null);

/**
 * The summary of a set of certified inputs: certified accuracy at each radius, the median
 * certified radius and the median factor radius(dist) / radius(half) over the correctly
 * classified inputs.
 *
 * @example summarizeCertificates(doc.inputs, doc.radii).medianFactor
 */
export function summarizeCertificates(
  inputs: readonly CertifiedInput[],
  radii: readonly number[],
): CertifyFile["summary"] {
  const n = Math.max(inputs.length, 1);
  const correct = inputs.filter((x) => x.correct);
  const radiusOf = (x: CertifiedInput, r: "dist" | "half") => x[r].radius ?? Infinity;
  const med = (r: "dist" | "half") =>
    correct.length === 0 ? null : finiteOrNull(median(correct.map((x) => radiusOf(x, r))));
  const ratios = correct
    .map((x) => radiusOf(x, "dist") / radiusOf(x, "half"))
    .filter((v) => Number.isFinite(v) && v > 0);
  return {
    medianRadius: { dist: med("dist"), half: med("half") },
    medianFactor: ratios.length === 0 ? null : median(ratios),
    certifiedAccuracy: radii.map((radius, k) => ({
      radius,
      dist: inputs.filter((x) => x.correct && x.dist.certified[k]).length / n,
      half: inputs.filter((x) => x.correct && x.half.certified[k]).length / n,
    })),
  };
}
