import { tf } from "../../backend.ts";
import { batches, loadDataset, selectExamples, type ImageDataset, type ImageSplit } from "../../data/dataset.ts";
import { modelConfigForData } from "../modelConfig.ts";
import type { ModelBatch, TrainingKind } from "./registry.ts";

/**
 * Image training data (mnist, idx:DIR, cifar10:DIR): a ViT whose image size, channels and
 * classes come from the data; batches of flattened pixels [b, H*W*C].
 *
 * @example const { dataset, config } = await IMAGE_TRAINING.loadFresh("mnist", { seed: 0, limit: 256 });
 */
export const IMAGE_TRAINING: TrainingKind = {
  task: "image",
  defaultModel: "vit-tiny",
  rateUnit: "img/s",
  owns: (dataset) => (dataset as { kind?: string }).kind !== "text",
  async loadFresh(spec, options, given) {
    const dataset =
      (given as ImageDataset | undefined) ??
      (await loadDataset(spec, { seed: options.seed, limit: options.limit, testLimit: options.testLimit }));
    return { dataset, config: modelConfigForData(options.model ?? "vit-tiny", dataset) };
  },
  reload: (state) =>
    loadDataset(state.data.spec, {
      seed: state.seed,
      limit: state.data.limit ?? undefined,
      testLimit: state.data.testLimit ?? undefined,
    }),
  stateData: () => ({}),
  select: (split, positions) => selectExamples(split as ImageSplit, positions),
  *batches(split, order, batchSize): Iterable<ModelBatch> {
    for (const batch of batches(split as ImageSplit, order, batchSize))
      yield {
        size: batch.size,
        labels: batch.labels,
        inputs: () => ({ x: tf.tensor2d(batch.images, [batch.size, batch.images.length / batch.size]) }),
      };
  },
  tokenizer: () => null,
  describe: () => ({ lines: [], warnings: [] }),
};
