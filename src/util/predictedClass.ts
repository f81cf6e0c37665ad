import { NonFiniteError } from "./errors.ts";

/**
 * The class a model predicts from one row of its logits: the index of the largest logit, the
 * first of equal ones (as tf.argMax picks). Every prediction attnlip shows or compares is taken
 * here from the logits, never from softmax probabilities: in float32, logits that differ by
 * less than about 3e-8 relative to 1 give equal probabilities, whose argmax would be the first
 * of the tied classes while the attacks (which work on the logits) see another one.
 *
 * A logit of -Infinity is a class the model rules out (probability 0): it is never the
 * prediction, since a valid row has a larger entry.
 *
 * @param logits one row of logits, [classes], e.g. a tensor's dataSync() for one example.
 * @param who names the caller in the error ("explore", "attack", ...).
 * @returns the predicted class, 0 <= k < logits.length.
 * @throws RangeError when the row is empty; NonFiniteError (a RangeError the CLI reports as bad
 *   input) `WHO: logits: ...` when it holds NaN or +Infinity (no class distribution: broken or
 *   overflowing weights) or is -Infinity for every class.
 * @example predictedClass([0, 1e-8, -Infinity]) // 1 (softmax in float32 gives [0.5, 0.5, 0]: a tie)
 * @example predictedClass([2, 2]) // 0
 */
export function predictedClass(logits: ArrayLike<number>, who = "predictedClass"): number {
  if (logits.length === 0)
    throw new RangeError(`${who}: logits: empty row, expected one logit per class`);
  let best = -1;
  for (let k = 0; k < logits.length; k++) {
    const v = logits[k];
    if (Number.isNaN(v) || v === Infinity)
      throw new NonFiniteError(
        `${who}: logits: class ${k} is ${v}: the model's outputs are not a class distribution (broken or overflowing weights, or inputs holding NaN)`,
      );
    if (v !== -Infinity && (best < 0 || v > logits[best])) best = k;
  }
  if (best < 0)
    throw new NonFiniteError(
      `${who}: logits: every class is -Infinity (the model rules out every class)`,
    );
  return best;
}
