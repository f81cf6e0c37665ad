import { NonFiniteError } from "../util/errors.ts";
import type { BallNetwork } from "./ballNetwork.ts";
import { SIGMA_RULES, type SigmaRule } from "./ballRules.ts";

/**
 * Certification of one input from its {@link BallNetwork} (docs/math.md section 7): the
 * prediction cannot change inside B(x, r) when margin(x) > sqrt(2) L(x, r) r, since every
 * difference of two logits z_c - z_k has gradient (e_c - e_k)^T D logits, of norm at most
 * sqrt(2) ||D logits||, and L(x, r) bounds ||D logits|| on the whole ball. L(x, r) grows with
 * r, so the radii that pass form an interval [0, r*): the largest is found by bisection.
 * l_inf radii go through the norm relation ||d||_2 <= sqrt(D) ||d||_inf (D input entries).
 */

/** The threat models: l_2, or l_inf through the norm relation. */
export type CertifyNorm = "l2" | "linf";

/** Options of {@link certifyInput}. */
export interface CertifyInputOptions {
  /** The norm of the radii (and of the certified radius). */
  norm: CertifyNorm;
  /** Radii (in that norm, input units) at which to record L and whether the input is certified. */
  radii: readonly number[];
  /** Relative width at which the bisection stops [1e-3]. */
  tolerance?: number;
  /** Evaluations of L per rule at most in the bisection [200]. */
  maxEvaluations?: number;
  /** Called after each evaluation of L (progress), with the rule evaluated. */
  onEvaluation?: (rule: SigmaRule) => void;
}

/** What one rule gives for one input. */
export interface RuleCertificate {
  /**
   * The certified radius (in the asked norm): every input within it gets the same prediction;
   * 0 when the margin is not positive; Infinity when L(x, r) = 0 for every r.
   */
  radius: number;
  /** L(x, 0), the bound at the input itself. */
  atZero: number;
  /** L(x, r) at each asked radius (l_inf: at the l_2 radius sqrt(D) r). */
  lipschitz: number[];
  /** Whether the prediction is certified at each asked radius (margin > sqrt(2) L r). */
  certified: boolean[];
  /** Evaluations of L the bisection took. */
  evaluations: number;
}

/** One input's certificate under both rules. */
export interface InputCertificate {
  /** The float64 network's prediction (argmax of its logits). */
  prediction: number;
  /** Its logit minus the largest other one (> 0 unless there is a tie). */
  margin: number;
  /** By rule: "dist" (the attention distribution's probability boxes), "half" (sigma = 1/2). */
  rules: Record<SigmaRule, RuleCertificate>;
}

/**
 * The prediction and its margin from logits [classes].
 *
 * @throws NonFiniteError when a logit is NaN or infinite (weights that overflow float64's range).
 * @example predictionMargin([0, 2, 1]) // { prediction: 1, margin: 1 }
 */
export function predictionMargin(logits: ArrayLike<number>): {
  prediction: number;
  margin: number;
} {
  let prediction = 0;
  for (let c = 0; c < logits.length; c++) {
    if (!Number.isFinite(logits[c]))
      throw new NonFiniteError(
        `certify: logit ${c} is ${logits[c]} (the float64 forward pass of the input overflowed)`,
      );
    if (logits[c] > logits[prediction]) prediction = c;
  }
  let other = -Infinity;
  for (let c = 0; c < logits.length; c++)
    if (c !== prediction && logits[c] > other) other = logits[c];
  return { prediction, margin: logits[prediction] - other };
}

/**
 * The largest l_2 radius r with margin > sqrt(2) L(r) r, from below: 0 when the margin is not
 * positive; else a geometric search down from margin / (sqrt(2) L(0)) (no larger radius can
 * pass, L being non-decreasing) to the first radius that passes, then bisection until the
 * bracket is within `tolerance` of its upper end. The radius returned always passed.
 */
function largestRadius(
  margin: number,
  lipschitz: (r: number) => number,
  tolerance: number,
  maxEvaluations: number,
  onEvaluation: () => void,
): { radius: number; evaluations: number; atZero: number } {
  let evaluations = 0;
  const L = (r: number) => {
    evaluations++;
    onEvaluation();
    return lipschitz(r);
  };
  const atZero = L(0);
  if (!(margin > 0)) return { radius: 0, evaluations, atZero };
  if (atZero === 0) {
    // A constant network near x: check that L stays 0 far out, else bisect from a large radius.
    if (L(Number.MAX_VALUE / 4) === 0) return { radius: Infinity, evaluations, atZero };
  }
  const passes = (r: number) => margin > Math.SQRT2 * L(r) * r;
  let hi = atZero > 0 ? margin / (Math.SQRT2 * atZero) : Number.MAX_VALUE / 4;
  let lo = 0;
  // Down from hi until a radius passes (it does as r -> 0, where L(r) -> L(0)).
  let r = hi;
  while (evaluations < maxEvaluations) {
    r /= 2;
    if (r === 0) return { radius: 0, evaluations, atZero };
    if (passes(r)) {
      lo = r;
      hi = 2 * r;
      break;
    }
  }
  while (lo > 0 && hi - lo > tolerance * hi && evaluations < maxEvaluations) {
    const mid = (lo + hi) / 2;
    if (passes(mid)) lo = mid;
    else hi = mid;
  }
  return { radius: lo, evaluations, atZero };
}

/**
 * Certifies one input under both rules: its prediction and margin, the certified radius, and
 * L with the certified flag at each asked radius.
 *
 * @param net the classifier over the ball around the input ({@link BallNetwork}).
 * @returns the {@link InputCertificate}; radii in options.norm's units.
 * @throws RangeError on a negative or non-finite radius or bad tolerances; NonFiniteError on
 *   non-finite logits.
 * @example certifyInput(net, { norm: "l2", radii: [0, 0.01] }).rules.dist.radius
 */
export function certifyInput(net: BallNetwork, options: CertifyInputOptions): InputCertificate {
  const tolerance = options.tolerance ?? 1e-3;
  const maxEvaluations = options.maxEvaluations ?? 200;
  if (!(tolerance > 0 && tolerance < 1))
    throw new RangeError(`certify: tolerance must be in (0, 1), got ${tolerance}`);
  if (!(maxEvaluations >= 2))
    throw new RangeError(`certify: maxEvaluations must be >= 2, got ${maxEvaluations}`);
  for (const r of options.radii)
    if (!(r >= 0) || !Number.isFinite(r))
      throw new RangeError(`certify: radii must be finite and >= 0, got ${r}`);
  // l_inf: the ball {||d||_inf <= r} lies in {||d||_2 <= sqrt(D) r}.
  const toL2 = options.norm === "linf" ? Math.sqrt(net.inputSize) : 1;
  const { prediction, margin } = predictionMargin(net.logits);
  const rules = {} as Record<SigmaRule, RuleCertificate>;
  for (const rule of SIGMA_RULES) {
    const found = largestRadius(
      margin,
      (r) => net.lipschitz(r, rule),
      tolerance,
      maxEvaluations,
      () => options.onEvaluation?.(rule),
    );
    const lipschitz = options.radii.map((r) => {
      const value = net.lipschitz(r * toL2, rule);
      options.onEvaluation?.(rule);
      return value;
    });
    const certified = options.radii.map((r, k) => margin > Math.SQRT2 * lipschitz[k] * r * toL2);
    rules[rule] = {
      radius: found.radius / toL2,
      atZero: found.atZero,
      lipschitz,
      certified,
      evaluations: found.evaluations,
    };
  }
  return { prediction, margin, rules };
}
