import { IMAGE_INPUTS } from "./image.ts";
import { registerModelInputs } from "./registry.ts";
import { TEXT_INPUTS } from "./text.ts";

/**
 * The built-in model inputs, registered once: ViTs read images, text classifiers read token
 * ids (a new model kind: one file beside these plus one line here, or registerModelInputs
 * from outside).
 */
registerModelInputs(IMAGE_INPUTS);
registerModelInputs(TEXT_INPUTS);

export { checkImageEps, IMAGE_INPUTS } from "./image.ts";
export { TEXT_INPUTS } from "./text.ts";
export {
  checkDataTask,
  modelInputs,
  registerModelInputs,
  unregisterModelInputs,
  type ModelInputKind,
  type ModelInputs,
  type ReadingOptions,
} from "./registry.ts";
