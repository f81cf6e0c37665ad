/**
 * Robustness evaluation: registered attacks (FGSM, PGD; l_inf, l_2) in an input space
 * (images, or token embeddings of text), clean/robust accuracy, the Lipschitz proxy radius,
 * and the attack.json schema.
 */
export { fgsm, fgsmIn, FGSM_ATTACK, type FgsmOptions } from "./fgsm.ts";
export {
  pgd,
  pgdIn,
  PGD_ATTACK,
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
  evaluateIn,
  evaluateRobustness,
  type AttackName,
  type AttackOutcome,
  type EvaluateRobustnessOptions,
  type RobustnessAtEps,
  type RobustnessEvaluation,
} from "./evaluate.ts";
export {
  lipschitzProxy,
  lipschitzProxyIn,
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
  describeValue,
  epsLimit,
  resolveAttackOptions,
  type AttackSettings,
  type EpsLimit,
  type ResolvedAttackSettings,
} from "./options.ts";
export {
  attackWho,
  checkText,
  embeddingBatch,
  embeddingLogits,
  embeddingSpace,
  imageBatch,
  imageSpace,
  lossGradient,
  NO_CLIP,
  type InputBatch,
  type InputSpace,
  type TextInputs,
} from "./inputSpace.ts";
export {
  evaluateTextRobustness,
  fgsmEmbedding,
  pgdEmbedding,
  textLipschitzProxy,
  tokenEmbeddingsOf,
} from "./embedding.ts";
export {
  attackLabel,
  attackNames,
  attackSpec,
  orderAttacks,
  registerAttack,
  unregisterAttack,
  type AttackContext,
  type AttackOptionSpec,
  type AttackSettingName,
  type AttackSpec,
} from "./attacks.ts";
export { ATTACK_DEFAULTS, type DefaultRadii } from "./defaults.ts";
export {
  AttackFileSchema,
  AttackResultSchema,
  SplitSchema,
  upgradeAttackResult,
  type AttackFile,
  type AttackRecord,
  type AttackResult,
} from "./attackFile.ts";
