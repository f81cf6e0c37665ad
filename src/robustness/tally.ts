import type { tf } from "../backend.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import { attackNames, usesGradient } from "./attacks.ts";

/**
 * The bookkeeping of a robustness evaluation, and the types of its result (kept here, the
 * lowest file that fills them; evaluate.ts re-exports them).
 */

/** The name of a registered attack (attacks.ts: "pgd", "fgsm", "apgd", ..., and whatever else is registered). */
export type AttackName = string;

/** One attack at one radius. */
export interface AttackOutcome {
  /** Fraction of ALL examples classified correctly both clean and under attack, in [0, 1]. */
  robustAccuracy: number;
  /** Per example [n]: 1 when the example was correct clean and the attack made it wrong. */
  success: Uint8Array;
  /**
   * Per example [n]: 1 when the loss gradient with respect to the input was exactly zero
   * where the attack looked (FGSM: at x; PGD: at one or more steps). All 0 at eps 0.
   */
  zeroGradient: Uint8Array;
  /**
   * Fraction of ALL examples flagged in zeroGradient, in [0, 1]; null at eps 0 (no attack
   * ran) and for attacks that never read the gradient (Square). Above 0, the robust accuracy
   * of those examples reflects gradient masking (the attack had no direction), not robustness.
   */
  zeroGradientFraction: number | null;
  /**
   * Per example [n]: 1 when an entry of the loss gradient was NaN or infinite where the
   * attack looked (the attack stepped along the finite entries only). All 0 at eps 0.
   */
  nonFiniteGradient: Uint8Array;
  /** Fraction of ALL examples flagged in nonFiniteGradient; null where zeroGradientFraction is. */
  nonFiniteGradientFraction: number | null;
  /**
   * Per example [n]: 1 when the example was correct clean and stays correct, and the attack's
   * point neither raises its cross-entropy above the clean input's nor lowers its margin
   * z_y - max_{j != y} z_j below it: the loss did not rise along the attack (the attacks here
   * raise the cross-entropy or a loss that falls with the margin). An input whose other
   * classes are all masked (-inf) is never flagged.
   */
  lossNotRaised: Uint8Array;
  /** Fraction of ALL examples flagged in lossNotRaised; null at eps 0 and for gradient-free attacks. */
  lossNotRaisedFraction: number | null;
  /** Ensembles only (AutoAttack): per example, the member that broke it first, or null. */
  brokenBy?: (string | null)[];
}

/** Results at one radius. */
export interface RobustnessAtEps {
  eps: number;
  /** The step size of iterative attacks at this eps (the default rule or the given one). */
  stepSize: number;
  /** Outcome per attack run, by registered name (an attack not run is absent). */
  attacks: Partial<Record<AttackName, AttackOutcome>>;
}

/** What an evaluation returns. */
export interface RobustnessEvaluation {
  /** Examples evaluated. */
  count: number;
  /** Fraction classified correctly without attack, in [0, 1]. */
  cleanAccuracy: number;
  /** Per example [n]: 1 when classified correctly without attack. */
  cleanCorrect: Uint8Array;
  /** One entry per eps, in the order given. */
  results: RobustnessAtEps[];
  /**
   * The range check (asked with rangeEps): the same attacks at the radius of the whole input
   * range, where an attack with a usable gradient breaks (almost) every input. Absent when not
   * asked.
   */
  range?: RobustnessAtEps;
  /** Attacks run reduced for the model's class count, one line each (e.g. fewer target classes). */
  notes: string[];
  /** Wall time, seconds. */
  seconds: number;
}

/** Predictions and the two loss measures of a batch (loss.ts predictWithMargins), each [size]. */
export interface BatchScores {
  predicted: Int32Array;
  /** z_y - max_{j != y} z_j, float64. */
  margins: Float64Array;
  /** CE - ln C, float64. */
  losses: Float64Array;
}

/** The flags an attack hands back for one batch, each [size]. */
export interface BatchFlags {
  onZeroGradient: (zero: Uint8Array) => void;
  onNonFiniteGradient: (flags: Uint8Array) => void;
  onBrokenBy: (names: (string | null)[]) => void;
}

/**
 * The attacks an evaluation runs (registered names; ATTACK_DEFAULTS.attacks = fgsm and pgd by
 * default; duplicates dropped), after checking that at least one eps is given.
 *
 * @throws RangeError naming `who` on an attack that is not registered or an empty eps list.
 * @example resolveAttacks({ attack: ["pgd", "pgd"], eps: [0.1] }, "me") // ["pgd"]
 */
export function resolveAttacks(
  options: { attack?: AttackName | readonly AttackName[]; eps: readonly number[] },
  who: string,
): AttackName[] {
  const asked: readonly AttackName[] =
    typeof options.attack === "string"
      ? [options.attack]
      : (options.attack ?? ATTACK_DEFAULTS.attacks);
  const attacks = [...new Set(asked)];
  const known = attackNames();
  if (attacks.length === 0 || !attacks.every((a) => known.includes(a)))
    throw new RangeError(
      `${who}: attack must be one or more of ${known.join(", ")}, got ${JSON.stringify(options.attack)}`,
    );
  if (!Array.isArray(options.eps) || options.eps.length === 0)
    throw new RangeError(`${who}: give at least one eps`);
  return attacks;
}

/** Per-attack flags [n] of one radius. */
interface Flags {
  success: Uint8Array;
  zero: Uint8Array;
  nonFinite: Uint8Array;
  lossNotRaised: Uint8Array;
  brokenBy: (string | null)[] | null;
}

/**
 * The bookkeeping that input-space and embedding-space robustness evaluation share: clean
 * correctness per example, attack success per eps and attack, the masking flags (zero and
 * non-finite gradients, a loss that did not rise), progress and a single warning, and the
 * final robust accuracies. An example counts as robust only if it is correct both clean and
 * under attack, so robust accuracy never exceeds clean accuracy.
 */
export class AttackTally {
  readonly cleanCorrect: Uint8Array;
  private readonly flags: Map<AttackName, Flags>[];
  private done = 0;
  private warned = false;
  private readonly started = performance.now();

  /**
   * @param n number of examples.
   * @param eps radii in input units (0 = no attack: robust accuracy = clean accuracy).
   * @param attacks the attacks to run at each non-zero eps.
   * @param batches number of batches (for progress totals).
   */
  constructor(
    readonly n: number,
    readonly eps: readonly number[],
    readonly attacks: readonly AttackName[],
    private readonly batches: number,
    private readonly onProgress?: (done: number, total: number) => void,
    private readonly onWarning?: (message: string) => void,
  ) {
    this.cleanCorrect = new Uint8Array(n);
    this.flags = eps.map(
      () =>
        new Map(
          attacks.map((a) => [
            a,
            {
              success: new Uint8Array(n),
              zero: new Uint8Array(n),
              nonFinite: new Uint8Array(n),
              lossNotRaised: new Uint8Array(n),
              brokenBy: null,
            },
          ]),
        ),
    );
  }

  /** Passes the first warning of the evaluation on (console.warn by default); drops the rest. */
  readonly warnOnce = (message: string): void => {
    if (this.warned) return;
    this.warned = true;
    (this.onWarning ?? ((s: string) => console.warn(s)))(message);
  };

  /**
   * Records one batch: its clean predictions, then for every non-zero eps and attack the
   * adversarial batch made by `attack`, its predictions and margins, and the flags the attack
   * hands back.
   *
   * @param start index of the batch's first example; labels and cleanPredicted [size].
   * @param clean margins and cross-entropies of the clean batch [size] (float64), as
   *   `predict` computes them (the same forward path, so an unmoved input compares equal).
   * @param predict classes, margins and cross-entropies of a batch of adversarial inputs
   *   (throws on logits that define no class distribution: NaN, +inf or a row all -inf; a
   *   -inf logit alone is allowed).
   * @param attack adversarial inputs for (attack name, eps index, eps); disposed here. It
   *   passes the `flags` callbacks on to the attack, which calls them with its flags [size].
   */
  recordBatch(
    start: number,
    labels: Int32Array,
    cleanPredicted: Int32Array,
    clean: BatchScores,
    predict: (adversarial: tf.Tensor) => BatchScores,
    attack: (name: AttackName, e: number, eps: number, flags: BatchFlags) => tf.Tensor,
  ): void {
    const size = labels.length;
    for (let i = 0; i < size; i++)
      this.cleanCorrect[start + i] = cleanPredicted[i] === labels[i] ? 1 : 0;
    const total = this.batches * this.eps.filter((e) => e > 0).length * this.attacks.length;
    this.eps.forEach((eps, e) => {
      if (eps === 0) return; // x_adv = x: success stays 0, robust = clean
      for (const name of this.attacks) {
        const f = this.flags[e].get(name)!;
        const adv = attack(name, e, eps, {
          onZeroGradient: (zero) => f.zero.set(zero, start),
          onNonFiniteGradient: (bad) => f.nonFinite.set(bad, start),
          onBrokenBy: (names) => {
            f.brokenBy ??= new Array<string | null>(this.n).fill(null);
            names.forEach((v, i) => (f.brokenBy![start + i] = v));
          },
        });
        let after: BatchScores;
        try {
          after = predict(adv);
        } finally {
          adv.dispose();
        }
        for (let i = 0; i < size; i++) {
          const correct = this.cleanCorrect[start + i] === 1;
          const broken = after.predicted[i] !== labels[i];
          f.success[start + i] = correct && broken ? 1 : 0;
          const raised = after.margins[i] < clean.margins[i] || after.losses[i] > clean.losses[i];
          f.lossNotRaised[start + i] =
            correct && !broken && clean.margins[i] !== Infinity && !raised ? 1 : 0;
        }
        this.onProgress?.(++this.done, total);
      }
    });
  }

  /**
   * The evaluation's result; `stepSize(eps, e)` gives the iterative attacks' step at each eps.
   * With `rangeLast`, the last radius is the range check (RobustnessEvaluation.range), not a
   * result row.
   */
  result(
    stepSize: (eps: number, e: number) => number,
    notes: string[] = [],
    rangeLast = false,
  ): RobustnessEvaluation {
    const correct = this.cleanCorrect.reduce((a, c) => a + c, 0);
    const rows = this.eps.map((eps, e) => {
      const r: RobustnessAtEps = { eps, stepSize: stepSize(eps, e), attacks: {} };
      for (const a of this.attacks)
        r.attacks[a] = outcomeOf(this.flags[e].get(a)!, correct, this.n, eps > 0, usesGradient(a));
      return r;
    });
    const range = rangeLast ? rows.pop() : undefined;
    return {
      count: this.n,
      cleanAccuracy: correct / this.n,
      cleanCorrect: this.cleanCorrect,
      results: rows,
      ...(range !== undefined ? { range } : {}),
      notes,
      seconds: (performance.now() - this.started) / 1000,
    };
  }
}

/**
 * An attack's outcome at one radius from its per-example flags [n].
 *
 * @param correct examples correct clean; @param ran whether the attack ran (eps > 0);
 * @param gradient whether it reads the gradient (else its gradient fractions are null).
 */
export function outcomeOf(
  f: Flags,
  correct: number,
  n: number,
  ran: boolean,
  gradient: boolean,
): AttackOutcome {
  const count = (flags: Uint8Array) => flags.reduce((a, c) => a + c, 0);
  const fraction = (flags: Uint8Array) => (ran && gradient ? count(flags) / n : null);
  return {
    robustAccuracy: (correct - count(f.success)) / n,
    success: f.success,
    zeroGradient: f.zero,
    zeroGradientFraction: fraction(f.zero),
    nonFiniteGradient: f.nonFinite,
    nonFiniteGradientFraction: fraction(f.nonFinite),
    lossNotRaised: f.lossNotRaised,
    lossNotRaisedFraction: fraction(f.lossNotRaised),
    ...(f.brokenBy !== null ? { brokenBy: f.brokenBy } : {}),
  };
}
