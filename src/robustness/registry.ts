import type { tf } from "../backend.ts";
import type { InputBatch, InputSpace } from "./inputSpace.ts";
import type { ZeroGradientFn } from "./loss.ts";
import type { ResolvedAttackSettings } from "./options.ts";
import { InputError } from "../util/errors.ts";

/**
 * The attack registry: every attack registers once, by name, with what it reads of the shared
 * settings (and their defaults) and a `run` that works in any {@link InputSpace}. The
 * evaluation (evaluateRobustness, evaluateTextRobustness), the `attnlip attack` command (its
 * --attack choices and --help), attack.json (`robust` and `zeroGradient` per attack), the
 * report's columns and the demo all take the list from here. Adding an attack is one file
 * (torchattacks style: its docstring names the paper, the norm, the arguments with defaults,
 * the input range and the shapes) and one {@link registerAttack} call (built-ins: attacks.ts,
 * which registers them and re-exports this module; read the registry through attacks.ts so
 * that they are there).
 *
 * This file holds the types the attack files implement and imports none of them, so that no
 * import runs back from an attack to the registry that lists it.
 */

/** The shared settings an attack may read (beside norm and eps, which every attack takes). */
export type AttackSettingName =
  "steps" | "stepSize" | "randomStart" | "restarts" | "seed" | "queries" | "targets";

/** One setting an attack reads, with its default (from ATTACK_DEFAULTS) and a line of help. */
export interface AttackOptionSpec {
  default: number | boolean | null;
  help: string;
}

/** What an attack's `run` gets for one batch at one radius. */
export interface AttackContext {
  /** The batch: its clean point x, logits, padding mask and clip range. */
  batch: InputBatch;
  /** The input space's kind ("image": clipped to batch.clip; "embedding": padding masked, no clipping). */
  kind: InputSpace["kind"];
  /** True classes, int32 [b] (kept by the caller). */
  labels: tf.Tensor;
  /** Checked settings; seed is already this batch's and radius's own stream. */
  settings: ResolvedAttackSettings;
  /** The attack's name in messages (e.g. "fgsm", "fgsmEmbedding"). */
  who: string;
  /** Where the one warning of a call goes [console.warn]. */
  onWarning?: (message: string) => void;
  /** Gets the per-example flags [b]: 1 where the loss gradient was exactly zero where the attack looked. */
  onZeroGradient?: ZeroGradientFn;
  /**
   * Gets the per-example flags [b]: 1 where an entry of the loss gradient was NaN or infinite
   * where the attack looked (the attack then stepped along the finite entries only).
   */
  onNonFiniteGradient?: ZeroGradientFn;
  /**
   * Ensembles only: gets, per example [b], the name of the member that broke it first, or null
   * (not broken, or misclassified before any attack).
   */
  onBrokenBy?: (names: (string | null)[]) => void;
}

/** What an attack makes of a model's class count: it cannot run (error), runs reduced (note), or as described. */
export type ClassCheck = { error: string } | { note: string } | null;

/** A registered attack. */
export interface AttackSpec {
  /** Name on the command line and in attack.json: lower case letters, digits and "-" (not "both" or "all"). */
  name: string;
  /** Name in tables and charts, e.g. "PGD". */
  label: string;
  /** One line for --help. */
  summary: string;
  /** The settings it reads beyond norm and eps, with defaults. */
  options: Readonly<Partial<Record<AttackSettingName, AttackOptionSpec>>>;
  /**
   * True for an attack that never reads the loss gradient (score-based, e.g. Square): the
   * masking checks compare what it breaks with what the gradient attacks break [false].
   */
  gradientFree?: boolean;
  /**
   * Ensembles only: the registered attacks it runs, in order, on a model with `classes`
   * classes (e.g. AutoAttack leaves APGD-T out with 2 classes).
   */
  members?: (classes: number) => string[];
  /**
   * Whether it can run on a model with `classes` classes and `targets` target classes asked:
   * an error (e.g. the DLR loss with 2 classes), a note (e.g. fewer target classes), or null
   * [absent: any class count].
   */
  checkClasses?: (classes: number, targets: number) => ClassCheck;
  /**
   * Adversarial inputs for one batch: float32, batch.x's shape, within eps of batch.x in
   * settings.norm, inside batch.clip, unchanged where batch.mask zeroes (a new tensor the
   * caller disposes; batch.x is not disposed).
   */
  run(context: AttackContext): tf.Tensor;
}

const REGISTRY = new Map<string, AttackSpec>();

/** Words the command reserves for sets of attacks. */
const RESERVED = new Set(["both", "all"]);

/**
 * Registers an attack under its name.
 *
 * @returns the spec.
 * @throws RangeError when the name is malformed, reserved ("both", "all") or taken.
 * @example
 * registerAttack({
 *   name: "noise", label: "noise", summary: "random signs", options: {},
 *   run: ({ batch, settings }) => tf.tidy(() => tf.clipByValue(
 *     tf.add(batch.x, tf.mul(settings.eps, tf.sign(tf.randomNormal(batch.x.shape)))), ...batch.clip)),
 * });
 */
export function registerAttack(spec: AttackSpec): AttackSpec {
  if (typeof spec.name !== "string" || !/^[a-z][a-z0-9-]*$/.test(spec.name))
    throw new RangeError(
      `registerAttack: name must be lower-case letters, digits and "-", starting with a letter, got ${JSON.stringify(spec.name)}`,
    );
  if (RESERVED.has(spec.name))
    throw new RangeError(`registerAttack: "${spec.name}" is reserved for a set of attacks`);
  if (REGISTRY.has(spec.name))
    throw new RangeError(`registerAttack: an attack named "${spec.name}" is already registered`);
  if (typeof spec.run !== "function")
    throw new RangeError(`registerAttack: ${spec.name}: run must be a function`);
  REGISTRY.set(spec.name, spec);
  return spec;
}

/**
 * Removes a registered attack (tests, plug-ins); built-ins may be removed too.
 *
 * @returns whether it was registered.
 * @example unregisterAttack("noise") // true after the example of registerAttack
 */
export function unregisterAttack(name: string): boolean {
  return REGISTRY.delete(name);
}

/**
 * The registered attacks' names, in registration order (built-ins, attacks.ts: pgd, fgsm,
 * apgd, apgd-dlr, apgd-t, square, autoattack).
 *
 * @example attackNames() // ["pgd", "fgsm", "apgd", "apgd-dlr", "apgd-t", "square", "autoattack"]
 */
export function attackNames(): string[] {
  return [...REGISTRY.keys()];
}

/**
 * The registered attack of that name.
 *
 * @throws RangeError naming `who` and the registered names when there is none.
 * @example attackSpec("pgd").label // "PGD"
 */
export function attackSpec(name: string, who = "attackSpec"): AttackSpec {
  const spec = REGISTRY.get(name);
  if (spec === undefined)
    throw new RangeError(
      `${who}: unknown attack ${JSON.stringify(name)} (registered: ${attackNames().join(", ")})`,
    );
  return spec;
}

/**
 * The registered attacks among `names` (default: all, in registration order) that read a
 * shared setting, in the order given; names not registered are left out.
 *
 * @example attacksReading("stepSize", ["apgd", "pgd"]) // ["pgd"]
 */
export function attacksReading(
  setting: AttackSettingName,
  names: readonly string[] = attackNames(),
): string[] {
  return names.filter((a) => REGISTRY.get(a)?.options[setting] !== undefined);
}

/**
 * The default of a setting for one attack (its option table), or undefined when it does not
 * read the setting or is not registered.
 *
 * @example settingDefault("apgd", "steps") // 100
 */
export function settingDefault(
  name: string,
  setting: AttackSettingName,
): number | boolean | null | undefined {
  return REGISTRY.get(name)?.options[setting]?.default;
}

/**
 * Checks the attacks against the model's class count (each attack's checkClasses; an
 * ensemble's members too): throws when one cannot run, and returns the notes of those that
 * run reduced (e.g. fewer target classes), one line each.
 *
 * @param who the start of the message, e.g. "attack: --attack" or "evaluateIn".
 * @throws InputError `${who}: ${error}` for the first attack that cannot run (e.g. "apgd-dlr:
 *   the DLR loss needs at least 3 classes, the model has 2; ...").
 * @example checkAttackClasses(["apgd-t"], 5, 9, "me") // ["apgd-t: 4 target classes (the model has 5 classes), not 9"]
 */
export function checkAttackClasses(
  names: readonly string[],
  classes: number,
  targets: number,
  who: string,
): string[] {
  const notes: string[] = [];
  for (const name of names) {
    const spec = attackSpec(name, who);
    const result = spec.checkClasses?.(classes, targets) ?? null;
    if (result !== null && "error" in result) throw new InputError(`${who}: ${result.error}`);
    if (result !== null && !notes.includes(result.note)) notes.push(result.note);
    for (const note of checkAttackClasses(spec.members?.(classes) ?? [], classes, targets, who))
      if (!notes.includes(note)) notes.push(note);
  }
  return notes;
}

/**
 * The label of an attack in tables and charts: the registered label, else the name in upper
 * case (an attack.json written where more attacks were registered).
 *
 * @example attackLabel("fgsm") // "FGSM"
 */
export function attackLabel(name: string): string {
  return REGISTRY.get(name)?.label ?? name.toUpperCase();
}

/**
 * Attack names in display order: registered ones in registration order, then unknown ones in
 * the order given.
 *
 * @example orderAttacks(["fgsm", "apgd", "pgd"]) // ["pgd", "fgsm", "apgd"] (apgd not registered)
 */
export function orderAttacks(names: Iterable<string>): string[] {
  const set = new Set(names);
  return [...attackNames().filter((n) => set.has(n)), ...[...set].filter((n) => !REGISTRY.has(n))];
}

/**
 * Whether a registered attack reads the loss gradient (every attack but the gradient-free
 * ones, e.g. Square; an ensemble with a gradient member does). Unknown names count as
 * gradient attacks.
 *
 * @example usesGradient("square") // false
 */
export function usesGradient(name: string): boolean {
  return REGISTRY.get(name)?.gradientFree !== true;
}
