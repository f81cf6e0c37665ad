import { tf } from "../../backend.ts";
import { batches, loadDataset, selectExamples, type ImageDataset, type ImageSplit } from "../../data/dataset.ts";
import { modelConfigForData } from "../modelConfig.ts";
import type { ModelBatch, TrainingKind } from "./registry.ts";
import { drawShifts, shiftImages } from "./shift.ts";

const DEFAULT_MODEL = "vit-tiny";

/**
 * Image training data (mnist, idx:DIR, cifar10:DIR): a ViT whose image size, channels and
 * classes come from the data (a preset's patch size must divide the image side); batches of
 * flattened pixels float32 [b, H*W*C] in the data set's range; training batches may be shifted
 * at random (augment, kinds/shift.ts).
 *
 * loadFresh and reload throw InputError on unreadable data (IdxError, Cifar10Error) and on a
 * model that does not fit the images (train/modelConfig.ts modelConfigForData).
 *
 * @example const { dataset, config } = await IMAGE_TRAINING.loadFresh("mnist", { seed: 0, limit: 256 });
 */
export const IMAGE_TRAINING: TrainingKind = {
  task: "image",
  modelKind: "vit",
  defaultModel: DEFAULT_MODEL,
  rateUnit: "img/s",
  owns: (dataset) => "images" in dataset.train,
  async loadFresh(spec, options, given) {
    const dataset =
      (given as ImageDataset | undefined) ??
      (await loadDataset(spec, { seed: options.seed, limit: options.limit, testLimit: options.testLimit }));
    // A fine-tuned Hugging Face ViT keeps its config: the images must fit it.
    return { dataset, config: modelConfigForData(options.pretrained?.config ?? options.model ?? DEFAULT_MODEL, dataset) };
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
  augment(batch, settings, rng, dataset) {
    if (settings.shift === 0) return batch;
    const d = dataset as ImageDataset;
    const shifts = drawShifts(batch.size, settings.shift, rng);
    return {
      ...batch,
      inputs: () => ({ x: shiftImages(batch.inputs().x as tf.Tensor2D, d.train.shape, shifts, d.range[0]) }),
    };
  },
  tokenizer: () => null,
  describe: () => ({ lines: [], warnings: [] }),
};
