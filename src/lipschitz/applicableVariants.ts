import { refuseDotOnlyVariants } from "./layers/l2Attention.ts";
import type { HeadVariant } from "./rules/headTypes.ts";
import { refuseL2Variants } from "./variants/index.ts";

/**
 * Refuses, before any work, bound variants that do not apply to a model's attention: the L2
 * variants (`kim`, `l2-dist`, `l2-cov`) on dot-product attention, and a list of dot-product
 * variants only on L2 attention (each of their values would be the vacuous Infinity). The
 * layers' rules refuse the same when they meet the layer (layers/attention.ts,
 * layers/l2Attention.ts); this lets a command say so before it loads its data.
 *
 * @param attention the model config's attention (absent: dot-product).
 * @param variants the variants asked for.
 * @param who the start of the message, e.g. "analyze: --variants".
 * @throws InputError `WHO: ...` with the rule's own reason.
 * @example refuseInapplicableVariants("l2", ["fused"], "analyze: --variants") // throws
 */
export function refuseInapplicableVariants(
  attention: "dot" | "l2" | undefined,
  variants: readonly HeadVariant[],
  who: string,
): void {
  if (attention === "l2") refuseDotOnlyVariants(variants, who);
  else refuseL2Variants(variants, who);
}
