import {
  modelPreset,
  parseModelConfig,
  type ModelConfig,
  type ModelConfigInput,
} from "./config.ts";
import { TextClassifier } from "./textClassifier.ts";
import { VisionTransformer } from "./vit.ts";

/** Either model. */
export type Model = VisionTransformer | TextClassifier;

/**
 * Builds a model from a config object, a JSON string, or a preset name (`vit-tiny`, `text-tiny`).
 *
 * @param seed initialisation seed (default 0): the same (config, seed) gives the same weights
 *   on every backend.
 * @throws ConfigError on an invalid config or unknown preset name.
 */
export function createModel(config: ModelConfigInput | ModelConfig | string, seed = 0): Model {
  let parsed: ModelConfig;
  if (typeof config === "string") {
    parsed = config.trimStart().startsWith("{") ? parseModelConfig(config) : modelPreset(config);
  } else parsed = parseModelConfig(config);
  return parsed.kind === "vit"
    ? new VisionTransformer(parsed, seed)
    : new TextClassifier(parsed, seed);
}
