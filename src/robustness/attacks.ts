import { APGD_ATTACK } from "./apgd.ts";
import { APGD_DLR_ATTACK } from "./apgdDlr.ts";
import { APGD_T_ATTACK } from "./apgdTargeted.ts";
import { AUTOATTACK } from "./autoattack.ts";
import { FGSM_ATTACK } from "./fgsm.ts";
import { PGD_ATTACK } from "./pgd.ts";
import { registerAttack } from "./registry.ts";
import { SQUARE_ATTACK } from "./square.ts";

/**
 * The built-in attacks, registered once, in this order (the order of --attack's choices, of
 * attack.json's columns and of the report's): PGD, FGSM, APGD-CE, APGD-DLR, APGD-T, Square,
 * and the AutoAttack ensemble. Adding one: a file like pgd.ts exporting its spec, and a line
 * here (or registerAttack from outside). Read the registry through this module, so that the
 * built-ins are registered before anything asks for them; registry.ts holds the types and the
 * map, and imports no attack.
 */
registerAttack(PGD_ATTACK);
registerAttack(FGSM_ATTACK);
registerAttack(APGD_ATTACK);
registerAttack(APGD_DLR_ATTACK);
registerAttack(APGD_T_ATTACK);
registerAttack(SQUARE_ATTACK);
registerAttack(AUTOATTACK);

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
} from "./registry.ts";
