import { tf } from "../../backend.ts";
import { imageEvaluationSplit } from "../../data/evaluationInputs.ts";
import { InputError } from "../../util/errors.ts";
import { formatNumber } from "../../util/format.ts";
import { per255Advice } from "../../util/per255.ts";
import { ATTACK_DEFAULTS, type DefaultNorm } from "../defaults.ts";
import { imageSpace } from "../inputSpace.ts";
import { epsLimit } from "../options.ts";
import type { ModelInputKind } from "./registry.ts";

/**
 * Checks attack radii against images: l_inf at most the width of the data set's pixel range,
 * l_2 at most its diameter, width * sqrt(H W C) (28 for MNIST, about 55.4 for CIFAR-10's
 * 32x32x3).
 *
 * @param range the data set's pixel range (ImageDataset.range); @param shape [H, W, C] of one image.
 * @param who the command, for the message.
 * @throws InputError `WHO: --eps: E is out of range for --norm N (at most MAX, what MAX is)`.
 * @example checkImageEps([60], "l2", [0, 1], [32, 32, 3], "cifar10:DIR") // throws: at most 55.4256
 */
export function checkImageEps(
  eps: readonly number[],
  norm: DefaultNorm,
  range: readonly [number, number],
  shape: readonly [number, number, number],
  spec: string,
  who = "attack",
): void {
  const [h, w, c] = shape;
  const limit = epsLimit(norm, range, h * w * c);
  const tooBig = limit === null ? undefined : eps.find((e) => e > limit.max);
  if (limit === null || tooBig === undefined) return;
  const pixels = `the pixel range [${range[0]}, ${range[1]}] of ${spec}`;
  const width = range[1] - range[0];
  const advice = per255Advice(tooBig, width, limit.max);
  const what =
    norm === "linf"
      ? `the width of ${pixels}` + (advice !== null ? `; ${advice}` : "")
      : `the l_2 diameter of ${h}x${w}x${c} images in ${pixels}, ${formatNumber(width)} * sqrt(${h}*${w}*${c})`;
  throw new InputError(
    `${who}: --eps: ${tooBig} is out of range for --norm ${norm} (at most ${formatNumber(limit.max)}, ${what})`,
  );
}

/**
 * A ViT's inputs: images float32 [N, H, W, C] in the data set's pixel range (mnist, idx:DIR,
 * cifar10:DIR), attacked in pixel space and clipped to that range.
 *
 * load throws InputError for a model that is not a ViT, images of another size than the
 * model's, data with more classes than the model, and the held-out checks' refusals
 * (data/evaluationInputs.ts).
 *
 * @example const inputs = await IMAGE_INPUTS.load(vit, { who: "attack", data: "mnist", trained: null, seed: 0, n: 8 }, {});
 */
export const IMAGE_INPUTS: ModelInputKind = {
  modelKind: "vit",
  task: "image",
  defaultData: "mnist",
  noun: "test inputs",
  attackNoun: "test examples",
  units: "input",
  defaultEps: (norm) => [...ATTACK_DEFAULTS.eps.image[norm]],
  space: (model, x, _mask, clip) => imageSpace(model, x, clip),
  async load(model, request) {
    if (model.config.kind !== "vit") throw new InputError(`${request.who}: image inputs need a ViT, this is a ${model.config.kind} model`);
    const chosen = await imageEvaluationSplit(request);
    const split = chosen.split;
    const [h, w, c] = split.shape;
    const { imageSize, channels } = model.config;
    if (h !== imageSize || w !== imageSize || c !== channels)
      throw new InputError(
        `${request.who}: --data: images are ${h}x${w}x${c}, the model expects ${imageSize}x${imageSize}x${channels}`,
      );
    if (chosen.classes > model.config.classes)
      throw new InputError(
        `${request.who}: --data: ${chosen.spec} has ${chosen.classes} classes, the model only ${model.config.classes} (its labels could not be scored)`,
      );
    const images = tf.tensor4d(split.images, [split.count, h, w, c]);
    return {
      spec: chosen.spec,
      info: chosen.info,
      count: split.count,
      labels: split.labels,
      x: images,
      mask: null,
      space: IMAGE_INPUTS.space(model, images, null, chosen.range),
      checkEps: (eps, norm, who) => checkImageEps(eps, norm, chosen.range, split.shape, chosen.spec, who),
      dispose: () => images.dispose(),
    };
  },
};
