import { tf } from "../backend.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import { attackNames } from "./attacks.ts";

/**
 * The bookkeeping of a robustness evaluation, and the types of its result (kept here, the
 * lowest file that fills them; evaluate.ts re-exports them).
 */

/** The name of a registered attack (attacks.ts: "pgd", "fgsm", and whatever else is registered). */
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
   * ran). Above 0, the robust accuracy of those examples reflects gradient masking (the
   * attack had no direction), not robustness.
   */
  zeroGradientFraction: number | null;
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
  /** Wall time, seconds. */
  seconds: number;
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

/**
 * The bookkeeping that input-space and embedding-space robustness evaluation share: clean
 * correctness per example, attack success per eps and attack, progress and a single warning,
 * and the final robust accuracies. An example counts as robust only if it is correct both
 * clean and under attack, so robust accuracy never exceeds clean accuracy.
 */
export class AttackTally {
  readonly cleanCorrect: Uint8Array;
  private readonly success: Map<AttackName, Uint8Array>[];
  private readonly zeroGradient: Map<AttackName, Uint8Array>[];
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
    const flags = () => new Map(attacks.map((a) => [a, new Uint8Array(n)]));
    this.success = eps.map(flags);
    this.zeroGradient = eps.map(flags);
  }

  /** Passes the first warning of the evaluation on (console.warn by default); drops the rest. */
  readonly warnOnce = (message: string): void => {
    if (this.warned) return;
    this.warned = true;
    (this.onWarning ?? ((s: string) => console.warn(s)))(message);
  };

  /**
   * Records one batch: its clean predictions, then for every non-zero eps and attack the
   * adversarial batch made by `attack` and its predictions, and the examples the attack found
   * an exactly zero gradient for.
   *
   * @param start index of the batch's first example; labels and cleanPredicted [size].
   * @param predict classes of a batch of adversarial inputs (throws on logits that define no
   *   class distribution: NaN, +inf or a row all -inf; a -inf logit alone is allowed).
   * @param attack adversarial inputs for (attack name, eps index, eps); disposed here. It
   *   passes `onZeroGradient` on to the attack, which calls it with its flags [size].
   */
  recordBatch(
    start: number,
    labels: Int32Array,
    cleanPredicted: Int32Array,
    predict: (adversarial: tf.Tensor) => Int32Array,
    attack: (
      name: AttackName,
      e: number,
      eps: number,
      onZeroGradient: (zero: Uint8Array) => void,
    ) => tf.Tensor,
  ): void {
    const size = labels.length;
    for (let i = 0; i < size; i++)
      this.cleanCorrect[start + i] = cleanPredicted[i] === labels[i] ? 1 : 0;
    const total = this.batches * this.eps.filter((e) => e > 0).length * this.attacks.length;
    this.eps.forEach((eps, e) => {
      if (eps === 0) return; // x_adv = x: success stays 0, robust = clean
      for (const name of this.attacks) {
        const adv = attack(name, e, eps, (zero) =>
          this.zeroGradient[e].get(name)!.set(zero, start),
        );
        let predicted: Int32Array;
        try {
          predicted = predict(adv);
        } finally {
          adv.dispose();
        }
        const out = this.success[e].get(name)!;
        for (let i = 0; i < size; i++)
          out[start + i] = this.cleanCorrect[start + i] === 1 && predicted[i] !== labels[i] ? 1 : 0;
        this.onProgress?.(++this.done, total);
      }
    });
  }

  /** The evaluation's result; `stepSize(eps, e)` gives the iterative attacks' step at each eps. */
  result(stepSize: (eps: number, e: number) => number): RobustnessEvaluation {
    const correct = this.cleanCorrect.reduce((a, c) => a + c, 0);
    const count = (flags: Uint8Array) => flags.reduce((a, c) => a + c, 0);
    const outcome = (s: Uint8Array, zero: Uint8Array, ran: boolean): AttackOutcome => ({
      robustAccuracy: (correct - count(s)) / this.n,
      success: s,
      zeroGradient: zero,
      zeroGradientFraction: ran ? count(zero) / this.n : null,
    });
    const results = this.eps.map((eps, e) => {
      const r: RobustnessAtEps = { eps, stepSize: stepSize(eps, e), attacks: {} };
      for (const a of this.attacks)
        r.attacks[a] = outcome(this.success[e].get(a)!, this.zeroGradient[e].get(a)!, eps > 0);
      return r;
    });
    return {
      count: this.n,
      cleanAccuracy: correct / this.n,
      cleanCorrect: this.cleanCorrect,
      results,
      seconds: (performance.now() - this.started) / 1000,
    };
  }
}
