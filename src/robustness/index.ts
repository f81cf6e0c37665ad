/** Robustness evaluation in input space: FGSM, PGD (l_inf, l_2), clean/robust accuracy and the Lipschitz proxy radius. */
export { fgsm, type FgsmOptions } from "./fgsm.ts";
export {
  pgd,
  pgdWithGradient,
  defaultStepSize,
  ATTACK_NORMS,
  type AttackNorm,
  type PgdOptions,
} from "./pgd.ts";
export {
  pgdStartLinf,
  pgdStartL2,
  pgdStepLinf,
  pgdStepL2,
  projectLinf,
  projectL2,
} from "./steps.ts";
export { randomOffsetLinf, randomOffsetL2 } from "./random.ts";
export {
  evaluateRobustness,
  type AttackName,
  type AttackOutcome,
  type EvaluateRobustnessOptions,
  type RobustnessAtEps,
  type RobustnessEvaluation,
} from "./evaluate.ts";
export {
  lipschitzProxy,
  type LipschitzProxy,
  type LipschitzProxyOptions,
} from "./lipschitzProxy.ts";
export {
  crossEntropyGradient,
  crossEntropySum,
  predictClasses,
  zeroGradientRows,
  type ClipRange,
  type Labels,
  type ZeroGradientFn,
} from "./loss.ts";
export {
  checkCount,
  checkEps,
  resolveAttackOptions,
  type AttackSettings,
  type ResolvedAttackSettings,
} from "./options.ts";
