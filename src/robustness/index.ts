/**
 * Robustness evaluation: registered attacks (FGSM, PGD, APGD-CE, APGD-DLR, APGD-T, Square and
 * the AutoAttack ensemble; l_inf, l_2) in an input space (images, or token embeddings of
 * text), clean/robust accuracy, the masking checks, the Lipschitz proxy radius, and the
 * attack.json schema.
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
  apgdIn,
  apgdRuns,
  apgdWithLoss,
  APGD_ATTACK,
  CROSS_ENTROPY_LOSS,
  type AttackLoss,
} from "./apgd.ts";
export { apgdDlrIn, APGD_DLR_ATTACK, DLR_LOSS, dlrValue } from "./apgdDlr.ts";
export {
  apgdTargetedIn,
  APGD_T_ATTACK,
  targetedDlrLoss,
  targetedDlrValue,
} from "./apgdTargeted.ts";
export {
  squareIn,
  squareWithBatch,
  squareP,
  squareLayout,
  SQUARE_ATTACK,
  SQUARE_P_INIT,
} from "./square.ts";
export { autoAttackIn, autoAttackMembers, AUTOATTACK } from "./autoattack.ts";
export { maskingChecks, type MaskingCheck, type MaskingReport } from "./masking.ts";
export {
  evaluateIn,
  evaluateRobustness,
  joinEvaluations,
  rangeRadius,
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
  checkGradient,
  crossEntropyGradient,
  crossEntropySum,
  nonFiniteGradientRows,
  predictClasses,
  predictWithMargins,
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
  attacksReading,
  checkAttackClasses,
  orderAttacks,
  registerAttack,
  settingDefault,
  unregisterAttack,
  usesGradient,
  type AttackContext,
  type AttackOptionSpec,
  type AttackSettingName,
  type AttackSpec,
  type ClassCheck,
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
