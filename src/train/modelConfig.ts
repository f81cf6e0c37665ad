import type { ImageDataset } from "../data/dataset.ts";
import type { TextDataset } from "../data/text/dataset.ts";
import {
  ConfigError,
  modelPreset,
  parseModelConfig,
  type ModelConfig,
  type ModelConfigInput,
} from "../nn/config.ts";
import { InputError } from "../util/errors.ts";

/** The model config a run trains: a preset or config fitted to (or checked against) its data. */

/**
 * The model config for a data set: a preset gets imageSize, channels (and classes) from the
 * data; an explicit config must match the data.
 *
 * @throws InputError when the images are not square, the preset's patch size does not divide
 *   the image size, the model is not a ViT, or an explicit config does not fit the data.
 */
export function modelConfigForData(
  model: string | ModelConfigInput,
  dataset: ImageDataset,
): ModelConfig {
  const [h, w, c] = dataset.train.shape;
  try {
    if (typeof model === "string" && !model.trimStart().startsWith("{")) {
      const preset = modelPreset(model);
      if (preset.kind !== "vit")
        throw new InputError(`model: "${model}" is a text model; image data needs a ViT`);
      if (h !== w) throw new InputError(`model: images are ${h}x${w}; the ViT needs square images`);
      return parseModelConfig({ ...preset, imageSize: h, channels: c, classes: dataset.classes });
    }
    const config = parseModelConfig(model);
    if (config.kind !== "vit")
      throw new InputError('model: image data needs a ViT config (kind "vit")');
    if (config.imageSize !== h || config.imageSize !== w || config.channels !== c)
      throw new InputError(
        `model: config expects ${config.imageSize}x${config.imageSize}x${config.channels} images, the data has ${h}x${w}x${c}`,
      );
    if (config.classes < dataset.classes)
      throw new InputError(
        `model: config has ${config.classes} classes, the data has ${dataset.classes}`,
      );
    return config;
  } catch (e) {
    if (e instanceof ConfigError) throw new InputError(e.message);
    throw e;
  }
}

/**
 * The model config for a text data set: a preset (or a JSON config) whose classes are set to
 * (preset) or checked against (explicit config) the data's classes.
 *
 * @throws InputError when the model is not a text model, or an explicit config has fewer
 *   classes than the data or a vocabulary / length smaller than the tokenizer's.
 */
export function modelConfigForText(
  model: string | ModelConfigInput,
  dataset: Pick<TextDataset, "classes" | "tokenizer">,
): ModelConfig {
  try {
    const base = baseTextConfig(model);
    const config =
      typeof model === "string" && !model.trimStart().startsWith("{")
        ? parseModelConfig({ ...base, classes: dataset.classes })
        : base;
    if (config.kind !== "text") throw new InputError("model: text data needs a text model");
    if (config.classes < dataset.classes)
      throw new InputError(
        `model: config has ${config.classes} classes, the data has ${dataset.classes}`,
      );
    if (config.vocabSize < dataset.tokenizer.size || config.maxLength < dataset.tokenizer.maxLength)
      throw new InputError(
        `model: vocabSize ${config.vocabSize} / maxLength ${config.maxLength} are smaller than the tokenizer's ${dataset.tokenizer.size} / ${dataset.tokenizer.maxLength}`,
      );
    return config;
  } catch (e) {
    if (e instanceof ConfigError) throw new InputError(e.message);
    throw e;
  }
}

/** A text preset or config as given (classes not yet set). @throws InputError on an image model. */
export function baseTextConfig(model: string | ModelConfigInput): ModelConfig {
  try {
    const config =
      typeof model === "string" && !model.trimStart().startsWith("{")
        ? modelPreset(model)
        : parseModelConfig(model);
    if (config.kind !== "text")
      throw new InputError(
        `model: ${typeof model === "string" ? `"${model}"` : "the config"} is a ViT; text data needs a text model (e.g. text-tiny)`,
      );
    return config;
  } catch (e) {
    if (e instanceof ConfigError) throw new InputError(e.message);
    throw e;
  }
}
