import { IMAGE_TRAINING } from "./image.ts";
import { registerTrainingKind } from "./registry.ts";
import { TEXT_TRAINING } from "./text.ts";

/**
 * The built-in training kinds, registered once: images and text (a new data task: one file
 * beside these plus one line here, or registerTrainingKind from outside).
 */
registerTrainingKind(IMAGE_TRAINING);
registerTrainingKind(TEXT_TRAINING);

export { IMAGE_TRAINING } from "./image.ts";
export { TEXT_TRAINING } from "./text.ts";
export {
  kindOfDataset,
  kindOfModel,
  kindOfSpec,
  registerTrainingKind,
  trainingKind,
  type AnyDataset,
  type AnySplit,
  type FreshDataOptions,
  type ModelBatch,
  type TrainingKind,
} from "./registry.ts";
