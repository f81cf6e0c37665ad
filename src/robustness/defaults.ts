/**
 * The one source of attack defaults: the library's option resolution
 * ({@link resolveAttackOptions}), the registered attacks' option tables, `runAttack` and the
 * `attnlip attack` command (its parser and its --help text) all read them from here.
 */

/** Threat model names (kept here so that the defaults need no other module). */
export type DefaultNorm = "linf" | "l2";

/** Default radii when none are given, by input kind and norm (input units: pixels in [0, 1], or embedding units). */
export interface DefaultRadii {
  /** Images in [0, 1]. */
  image: Record<DefaultNorm, number[]>;
  /**
   * Token embeddings of text models (embedding units; token embeddings of text-tiny have l_2
   * norms of order 1 per token after training; the l_2 radius is over the whole sequence).
   * Chosen so that a text-tiny trained for one epoch on the SpamAssassin corpus keeps part of
   * its accuracy under APGD (500 held-out messages, docs/results/study-spam.md): l_inf 0.001,
   * 0.002 and 0.005 left it about 95%, 90% and 22% robust accuracy, l_2 0.1 and 0.25 about 87%
   * and 19%. An earlier, smaller study found that l_2 0.5 and l_inf 0.01 broke almost every
   * input.
   */
  text: Record<DefaultNorm, number[]>;
}

/**
 * Defaults of every attack setting and of the attack command.
 *
 * @example ATTACK_DEFAULTS.steps // 10 (PGD; the APGD attacks: ATTACK_DEFAULTS.apgdSteps, 100)
 * @example ATTACK_DEFAULTS.eps.text.l2 // [0, 0.05, 0.1, 0.25]
 */
export const ATTACK_DEFAULTS = Object.freeze({
  /** Threat model. */
  norm: "linf" as DefaultNorm,
  /** Radii by input kind and norm. */
  eps: Object.freeze({
    image: { linf: [0, 0.05, 0.1, 0.2], l2: [0, 0.5, 1, 2] },
    text: { linf: [0, 0.001, 0.002, 0.005], l2: [0, 0.05, 0.1, 0.25] },
  }) as Readonly<DefaultRadii>,
  /**
   * Ascent steps of PGD, and of any iterative attack whose option table names no default of
   * its own (the APGD attacks: {@link ATTACK_DEFAULTS.apgdSteps}).
   */
  steps: 10,
  /** Steps of the APGD attacks (APGD-CE, APGD-DLR, APGD-T), as in Croce and Hein 2020 and AutoAttack. */
  apgdSteps: 100,
  /** Query budget of Square per input: 5,000, as in AutoAttack's standard version. */
  queries: 5000,
  /** Target classes of APGD-T: 9, as in AutoAttack's standard version (every other class of a 10-class model). */
  targets: 9,
  /** Step size of iterative attacks; null = the rule 2.5 * eps / steps. */
  stepSize: null as number | null,
  /** Start iterative attacks from a random point of the ball. */
  randomStart: true,
  /** Runs of attacks that restart (APGD) from new random starts, keeping per input the first that succeeds. */
  restarts: 1,
  /** Seed of random starts (and of --random-init / the data split in the command). */
  seed: 0,
  /** Attacks run when none are named, in this order. */
  attacks: Object.freeze(["fgsm", "pgd"]) as readonly string[],
  /** Examples per forward/backward pass. */
  batch: 32,
  /** Test examples attacked by the command. */
  n: 64,
  /** Model preset of the command with --random-init. */
  model: "vit-tiny",
  /** Data of the command (a checkpoint: its own data; a text model: spam). */
  data: "mnist",
  /** tfjs backend of the command. */
  backend: "wasm" as const,
});

/** The default step size rule, 2.5 * eps / steps (Madry et al. 2018). */
export function defaultStepSize(eps: number, steps: number): number {
  return (2.5 * eps) / steps;
}
