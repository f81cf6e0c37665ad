import { z } from "zod";
import type { EvaluationSplit } from "../data/heldOut.ts";
import type { MaskingReport } from "./masking.ts";

/**
 * attack.json, described once: `runAttack` validates what it writes against
 * {@link AttackFileSchema}, and the report reads files with the same schema. Per radius, the
 * robust accuracy and the zero-gradient fraction are keyed by the registered attack's name:
 *
 *     results: [{ eps: 0.1, robust: { fgsm: 0.5, pgd: 0.25 }, zeroGradient: { fgsm: 0, pgd: 0 } }]
 *
 * An attack that did not run is absent (older files wrote null; both mean the same). Newer
 * files add, per radius, the other masking flags per attack (nonFiniteGradient, lossNotRaised)
 * and an ensemble's detail (ensembles.autoattack: its members, the robust accuracy after each,
 * the member that broke each input), and at the top the settings each attack ran with
 * (attackSettings), notes on attacks run reduced for the class count, the range check and the
 * masking checks (`masking`: a flag and a line per check, and the lines of those that fired).
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
    Object.entries(old).filter(
      ([k]) => k !== "zeroGradient" && !(LEGACY_COLUMNS as readonly string[]).includes(k),
    ),
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

/** An ensemble's detail at one radius (AutoAttack). */
export const EnsembleSchema = z.looseObject({
  /** The members that ran, in order. */
  members: z.array(z.string()),
  /**
   * Robust accuracy after each member and those before it, as AutoAttack logs it (the first
   * member's own robust accuracy; the last one's is the ensemble's).
   */
  robustAfter: z.record(z.string(), z.number()),
  /** Per input (in order): the member that broke it first, "clean" when the model misclassifies it unattacked, null when robust. */
  brokenBy: z.array(z.string().nullable()),
});

/** One masking check: whether it fired (null: it could not run) and what was seen. */
const MaskingCheckSchema = z.looseObject({ flag: z.boolean().nullable(), line: z.string() });

/** The masking checks (robustness/masking.ts). */
export const MaskingSchema = z.looseObject({
  /** Inputs broken by the gradient-free attack (Square) but by no gradient attack. */
  gradientFreeOnly: MaskingCheckSchema,
  /** Inputs the gradient attacks leave correct at the radius of the whole input range. */
  rangeNotBroken: MaskingCheckSchema,
  /** Loss gradients exactly zero or not finite at inputs left robust. */
  gradientUnusable: MaskingCheckSchema,
  /** Inputs left robust whose loss did not rise along the attack. */
  lossNotRaised: MaskingCheckSchema,
  /** The lines of the checks that fired. */
  warnings: z.array(z.string()),
});

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
    /**
     * Per attack, the fraction of the n inputs where a gradient entry was NaN or infinite;
     * null at eps 0 and for gradient-free attacks. Absent in older files.
     */
    nonFiniteGradient: PerAttack.optional(),
    /**
     * Per attack, the fraction of the n inputs left robust whose loss did not rise (the
     * cross-entropy did not rise, the margin did not fall); null at eps 0 and for
     * gradient-free attacks. Absent in older files.
     */
    lossNotRaised: PerAttack.optional(),
    /** Ensembles that ran (AutoAttack), by name. */
    ensembles: z.record(z.string(), EnsembleSchema).optional(),
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
  /** Steps of every iterative attack, when they all ran the same number (attackSettings has each attack's). */
  steps: z.number().optional(),
  /** Step size of iterative attacks; null = the default rule 2.5 * eps / steps. */
  stepSize: z.number().nullable().optional(),
  /** Runs from new random starts of the attacks that restart (APGD); present when one ran. */
  restarts: z.number().int().min(1).optional(),
  seed: z.number().optional(),
  /** The settings each attack ran with (only those it reads), by name. */
  attackSettings: z
    .record(z.string(), z.record(z.string(), z.union([z.number(), z.boolean(), z.null()])))
    .optional(),
  /** Attacks run reduced for the model's class count (e.g. fewer APGD-T targets), one line each. */
  notes: z.array(z.string()).optional(),
  cleanAccuracy: z.number().nullable().optional(),
  results: z.array(AttackResultSchema),
  /**
   * The range check: the attacks at the radius of the whole input range (`what` says which),
   * robust accuracy per attack; null when it was not run.
   */
  rangeCheck: z
    .looseObject({ eps: z.number(), what: z.string(), robust: PerAttack })
    .nullable()
    .optional(),
  /** The masking checks. Absent in older files. */
  masking: MaskingSchema.optional(),
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

/** An ensemble's detail at one radius. */
export type EnsembleRecord = z.output<typeof EnsembleSchema>;

/** The masking checks as attack.json holds them. */
export type MaskingRecord = z.output<typeof MaskingSchema>;

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
  /** Absent when the attacks ran different numbers of steps (attackSettings has each one's). */
  steps?: number;
  stepSize: number | null;
  restarts?: number;
  seed: number;
  attackSettings: Record<string, Record<string, number | boolean | null>>;
  notes?: string[];
  cleanAccuracy: number;
  results: {
    eps: number;
    robust: Record<string, number | null>;
    zeroGradient: Record<string, number | null>;
    nonFiniteGradient: Record<string, number | null>;
    lossNotRaised: Record<string, number | null>;
    ensembles?: Record<string, EnsembleRecord>;
  }[];
  rangeCheck: { eps: number; what: string; robust: Record<string, number | null> } | null;
  masking: MaskingReport;
  proxy: {
    median: number | null;
    q1: number | null;
    q3: number | null;
    misclassified: number;
    radii: (number | null)[];
  };
  seconds: number;
}
