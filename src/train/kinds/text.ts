import { loadTextDataset, refuseEmptyTexts, selectTextExamples, textBatches, textBatchTensors, type TextDataset, type TextSplit } from "../../data/text/dataset.ts";
import { classesLine, rareClassWarnings } from "../../data/text/classes.ts";
import { InputError } from "../../util/errors.ts";
import { baseTextConfig, modelConfigForText } from "../modelConfig.ts";
import type { ModelConfig } from "../../nn/config.ts";
import type { FreshDataOptions, ModelBatch, TrainingKind } from "./registry.ts";

const DEFAULT_MODEL = "text-tiny";

/**
 * Text training data (spam, csv:FILE, jsonl:FILE): the tokenizer is built from the training
 * split with the model's vocabulary size and length (saved as tokenizer.json); batches of
 * token ids int32 [b, n] trimmed to their longest row (n <= maxLength), with the padding mask
 * float32 [b, n] (1 = real token); train_state.json records the class names, columns and
 * encoding.
 *
 * loadFresh throws InputError "model: text data needs a text model" for a ViT, and the
 * loader's InputErrors (unreadable file, missing column, unknown label); reload the latter.
 *
 * @example const { dataset, config } = await TEXT_TRAINING.loadFresh("spam", { seed: 0, limit: 512 });
 */
export const TEXT_TRAINING: TrainingKind = {
  task: "text",
  modelKind: "text",
  defaultModel: DEFAULT_MODEL,
  rateUnit: "examples/s",
  owns: (dataset) => (dataset as { kind?: string }).kind === "text",
  async loadFresh(spec, options, given) {
    if (options.pretrained !== undefined) return loadForPretrained(spec, options, given as TextDataset | undefined);
    const model = options.model ?? DEFAULT_MODEL;
    const base = baseTextConfig(model);
    if (base.kind !== "text") throw new InputError("model: text data needs a text model");
    const dataset =
      (given as TextDataset | undefined) ??
      (await loadTextDataset(spec, { ...reading(options), vocabSize: base.vocabSize, maxLength: base.maxLength }));
    return { dataset, config: modelConfigForText(model, dataset) };
  },
  reload: (state, tokenizer) =>
    loadTextDataset(state.data.spec, {
      seed: state.seed,
      limit: state.data.limit ?? undefined,
      testLimit: state.data.testLimit ?? undefined,
      textColumn: state.data.textColumn ?? undefined,
      labelColumn: state.data.labelColumn ?? undefined,
      encoding: state.data.encoding ?? undefined,
      labelNames: state.data.labels,
      tokenizer: tokenizer ?? undefined,
    }),
  stateData(dataset) {
    const d = dataset as TextDataset;
    return { labels: d.labelNames, textColumn: d.textColumn, labelColumn: d.labelColumn, encoding: d.encoding };
  },
  select: (split, positions) => selectTextExamples(split as TextSplit, positions),
  *batches(split, order, batchSize): Iterable<ModelBatch> {
    for (const batch of textBatches(split as TextSplit, order, batchSize))
      yield {
        size: batch.size,
        labels: batch.labels,
        inputs: () => {
          const { ids, mask } = textBatchTensors(batch);
          return { x: ids, mask };
        },
      };
  },
  tokenizer: (dataset) => (dataset as TextDataset).tokenizer,
  describe(dataset) {
    const d = dataset as TextDataset;
    // Every distinct label of a file is a class: show them, and flag the rare ones (a typo?).
    if (d.firstLines == null) return { lines: [], warnings: [] };
    return { lines: [classesLine(d)], warnings: rareClassWarnings(d) };
  },
};

/** How a fresh run reads its text data: split seed, limits, columns and encoding. */
function reading(options: FreshDataOptions) {
  const { seed, limit, testLimit, textColumn, labelColumn, encoding } = options;
  return { seed, limit, testLimit, textColumn, labelColumn, encoding };
}

/**
 * The data of a fine-tuned Hugging Face text model: read with its tokenizer, at most its
 * classes.
 *
 * @throws InputError on a model that is not a text model or data with more classes.
 */
async function loadForPretrained(
  spec: string,
  options: FreshDataOptions,
  given: TextDataset | undefined,
): Promise<{ dataset: TextDataset; config: ModelConfig }> {
  const { config, tokenizer, labels } = options.pretrained!;
  if (config.kind !== "text" || tokenizer === null) throw new InputError("model: text data needs a text model");
  const dataset =
    given ??
    // The model's own class names (id2label), when it has them, give the data's labels their ids.
    (await loadTextDataset(spec, { ...reading(options), tokenizer, labelNames: labels ?? undefined }));
  for (const split of [dataset.train, dataset.test]) refuseEmptyTexts(split, `data ${dataset.spec}`);
  if (dataset.classes > config.classes)
    throw new InputError(`model: data ${dataset.spec} has ${dataset.classes} classes (${dataset.labelNames.join(", ")}), the model's classifier only ${config.classes}`);
  return { dataset, config };
}
