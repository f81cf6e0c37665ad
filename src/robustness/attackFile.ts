import { z } from "zod";
import type { EvaluationSplit } from "../data/heldOut.ts";

/**
 * attack.json, described once: `runAttack` validates what it writes against
 * {@link AttackFileSchema}, and the report reads files with the same schema. Per radius, the
 * robust accuracy and the zero-gradient fraction are keyed by the registered attack's name:
 *
 *     results: [{ eps: 0.1, robust: { fgsm: 0.5, pgd: 0.25 }, zeroGradient: { fgsm: 0, pgd: 0 } }]
 *
 * An attack that did not run is absent (older files wrote null; both mean the same).
 * Older files with one column per attack (`pgd`, `fgsm`, and `zeroGradient.pgd/fgsm`) are
 * converted on reading ({@link upgradeAttackResult}). The schema checks only what a reader
 * uses and keeps unknown fields, so newer files with more fields still load. No tfjs here:
 * the report reads it without a backend.
 */

/** Which test examples an analysis or attack used (data/heldOut.ts EvaluationSplit; absent in older files). */
export const SplitSchema = z.looseObject({
  spec: z.string(),
  origin: z.enum(["checkpoint", "other-data", "random-init", "imported"]),
  splitSeed: z.number(),
  trainCount: z.number(),
  testCount: z.number(),
  evaluated: z.number(),
  evaluatedDigest: z.string(),
  digestsChecked: z.boolean(),
  leftOut: z.number().int().min(0).optional(),
  inputsChecked: z.boolean().optional(),
});

/** The per-attack columns of files written before attacks were registered by name. */
const LEGACY_COLUMNS = ["pgd", "fgsm"] as const;

/**
 * One result row of an older attack.json (`{eps, pgd, fgsm, zeroGradient: {pgd, fgsm}}`) in the
 * current layout (`{eps, robust: {...}, zeroGradient: {...}}`); a null column (the attack did
 * not run) is dropped. Rows already in the current layout, and anything that is not an
 * object, are returned unchanged.
 *
 * @example upgradeAttackResult({ eps: 0.1, pgd: 0.5, fgsm: null, zeroGradient: { pgd: 0, fgsm: null } })
 *   // { eps: 0.1, robust: { pgd: 0.5 }, zeroGradient: { pgd: 0 } }
 */
export function upgradeAttackResult(row: unknown): unknown {
  if (row === null || typeof row !== "object" || Array.isArray(row) || "robust" in row) return row;
  const old = row as Record<string, unknown>;
  if (!LEGACY_COLUMNS.some((a) => a in old)) return row;
  const rest = Object.fromEntries(
    Object.entries(old).filter(([k]) => k !== "zeroGradient" && !(LEGACY_COLUMNS as readonly string[]).includes(k)),
  );
  const ran = LEGACY_COLUMNS.filter((a) => old[a] !== null && old[a] !== undefined);
  const robust = Object.fromEntries(ran.map((a) => [a, old[a]]));
  const zero = old.zeroGradient;
  const upgraded: Record<string, unknown> = { ...rest, robust };
  if (zero !== undefined)
    upgraded.zeroGradient =
      zero !== null && typeof zero === "object"
        ? Object.fromEntries(ran.map((a) => [a, (zero as Record<string, unknown>)[a] ?? null]))
        : zero;
  return upgraded;
}

/** Value per attack name: a fraction in [0, 1], or null. */
const PerAttack = z.record(z.string(), z.number().nullable());

/** One radius of attack.json. */
export const AttackResultSchema = z.preprocess(
  upgradeAttackResult,
  z.looseObject({
    eps: z.number(),
    /** Robust accuracy per attack that ran (eps 0: the clean accuracy). */
    robust: PerAttack,
    /**
     * Per attack, the fraction of the n inputs whose loss gradient was exactly zero where the
     * attack looked (FGSM: at x; PGD: at one or more steps); null at eps 0 (no attack ran).
     * Above 0, robust accuracy there reflects gradient masking. Absent in older files.
     */
    zeroGradient: PerAttack.optional(),
  }),
);

/** The schema of attack.json (writer and reader). */
export const AttackFileSchema = z.looseObject({
  /** The model's config. */
  model: z.unknown().optional(),
  /** The checkpoint folder, or "PRESET (random init, seed S)". */
  source: z.string().optional(),
  /** The data spec attacked. */
  data: z.string().optional(),
  /** Which test examples were attacked (the checkpoint's held-out split for a checkpoint). */
  split: SplitSchema.optional(),
  /** Examples attacked. */
  n: z.number().optional(),
  norm: z.enum(["linf", "l2"]),
  /** Steps of iterative attacks. */
  steps: z.number().optional(),
  /** Step size of iterative attacks; null = the default rule 2.5 * eps / steps. */
  stepSize: z.number().nullable().optional(),
  /** Runs from new random starts of the attacks that restart (APGD); present when one ran. */
  restarts: z.number().int().min(1).optional(),
  seed: z.number().optional(),
  cleanAccuracy: z.number().nullable().optional(),
  results: z.array(AttackResultSchema),
  /** l_2 radii margin / (sqrt(2) L) (input units), 0 for misclassified examples. */
  proxy: z
    .looseObject({
      median: z.number().nullable(),
      q1: z.number().nullable(),
      q3: z.number().nullable(),
      misclassified: z.number().optional(),
      radii: z.array(z.number().nullable()).optional(),
    })
    .optional(),
  /** Wall time, seconds. */
  seconds: z.number().optional(),
});

/** attack.json as read (older files converted; fields older files lack are optional). */
export type AttackFile = z.output<typeof AttackFileSchema>;

/** One radius of attack.json. */
export type AttackResult = z.output<typeof AttackResultSchema>;

/**
 * attack.json as `runAttack` writes it: every field present (runAttack checks the document
 * against {@link AttackFileSchema} before writing it).
 */
export interface AttackRecord {
  model: unknown;
  source: string;
  data: string;
  split?: EvaluationSplit;
  n: number;
  norm: "linf" | "l2";
  steps: number;
  stepSize: number | null;
  restarts?: number;
  seed: number;
  cleanAccuracy: number;
  results: {
    eps: number;
    robust: Record<string, number | null>;
    zeroGradient: Record<string, number | null>;
  }[];
  proxy: {
    median: number | null;
    q1: number | null;
    q3: number | null;
    misclassified: number;
    radii: (number | null)[];
  };
  seconds: number;
}
