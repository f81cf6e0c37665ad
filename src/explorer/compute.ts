import { tf } from "../backend.ts";
import { analyze } from "../analysis/analyze.ts";
import { ALL_VARIANTS, type HeadVariant } from "../lipschitz/rules/index.ts";
import { createModel } from "../nn/create.ts";
import { parseModelConfig, type VitConfig } from "../nn/config.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { disposeTrace } from "../nn/trace.ts";
import { fgsm } from "../robustness/fgsm.ts";
import { pgd } from "../robustness/pgd.ts";
import { decodeSafetensors } from "../io/safetensors.ts";
import { checkHfConfig, hfModelFromParts } from "../hf/fromParts.ts";
import { sigmaFromRow } from "../softmax/sigma.ts";

/**
 * What the explorer page computes (in its web worker): a ViT from a config and safetensors
 * bytes, its prediction, attention maps and every bound variant beside the true values at one
 * image, and an attack's effect as eps grows. Plain data in and out, so that the same
 * functions run in a worker, in Node and in tests.
 */

/** One layer's row of the explorer's bounds table. */
export interface LayerBounds {
  /** "block 0", ..., or "network". */
  name: string;
  /** The true local Lipschitz constant (Krylov estimate from below for a block, exact for the network). */
  true: number;
  /** Every bound variant's value at this input. */
  bounds: Partial<Record<HeadVariant, number>>;
}

/** What {@link inspect} returns for one image. */
export interface Inspection {
  /** Softmax of the logits, [classes]. */
  probabilities: number[];
  /** Tokens per sequence (patches + the class token). */
  n: number;
  /** maps[block][head]: the n x n attention probabilities, row-major (rows = queries). */
  maps: number[][][];
  /** rowSigma[block][head][query]: sigma of that attention row (docs/math.md section 1). */
  rowSigma: number[][][];
  /** Per block, then the network. */
  layers: LayerBounds[];
}

/** One eps of an attack curve. */
export interface AttackPoint {
  eps: number;
  /** The class predicted at the adversarial input. */
  predicted: number;
  /** logit of `label` minus the largest other logit at the adversarial input (< 0: misclassified). */
  margin: number;
}

/**
 * A ViT that reads 28 x 28 grey images (the digits the page draws) from its config.json and
 * model.safetensors bytes: an attnlip checkpoint (config.json has `kind`) or a Hugging Face
 * ViTForImageClassification folder (config.json has `architectures` or `model_type`), imported
 * as `loadHfModel` imports it.
 *
 * @param config config.json's parsed JSON.
 * @param name the folder's name, for error messages.
 * @throws ConfigError on an invalid attnlip config; HfImportError on a Hugging Face config or
 *   tensors attnlip does not import; RangeError on a text model or another image size;
 *   SafetensorsError on malformed bytes; Error from setWeights naming a missing or misshapen tensor.
 * @example const model = modelFromBytes(JSON.parse(configText), new Uint8Array(await file.arrayBuffer()));
 */
export function modelFromBytes(
  config: unknown,
  weights: Uint8Array,
  name = "the model",
): TransformerClassifier {
  const hf =
    typeof config === "object" &&
    config !== null &&
    !Array.isArray(config) &&
    !("kind" in config) &&
    ("architectures" in config || "model_type" in config);
  // A Hugging Face config is checked before its weights are decoded.
  const parsed = hf
    ? checkHfConfig(config as Record<string, unknown>, `explore: ${name}`).config
    : parseModelConfig(config);
  if (parsed.kind !== "vit")
    throw new RangeError(
      `explore: ${name} is a ${parsed.kind} model; the explorer shows image models (ViTs)`,
    );
  if (parsed.imageSize !== 28 || parsed.channels !== 1)
    throw new RangeError(
      `explore: ${name} reads ${parsed.imageSize}x${parsed.imageSize}x${parsed.channels} images; the explorer draws 28x28 grey digits (MNIST-sized models)`,
    );
  const tensors = decodeSafetensors(weights, { name: "model.safetensors" }).tensors;
  if (hf)
    return hfModelFromParts(config as Record<string, unknown>, tensors, `explore: ${name}`)
      .model as TransformerClassifier;
  const model = createModel(parsed, 0) as TransformerClassifier;
  try {
    model.setWeights(tensors);
  } catch (e) {
    model.dispose();
    throw e;
  }
  return model;
}

/** The image as a [1, H, W, C] tensor, after checking its length and range. */
function imageTensor(model: TransformerClassifier, pixels: ArrayLike<number>): tf.Tensor {
  const c = model.config as VitConfig;
  const size = c.imageSize * c.imageSize * c.channels;
  if (pixels.length !== size)
    throw new RangeError(`explore: an image of ${size} values was expected, got ${pixels.length}`);
  for (let i = 0; i < size; i++)
    if (!(pixels[i] >= 0 && pixels[i] <= 1))
      throw new RangeError(`explore: pixel ${i} is ${pixels[i]}, outside [0, 1]`);
  return tf.tensor4d(Float32Array.from(pixels), [1, c.imageSize, c.imageSize, c.channels]);
}

/**
 * The prediction, attention maps with each row's sigma, and every bound variant beside the
 * true value per block and for the network, at one image (analyze, docs/math.md sections 2-3).
 *
 * @param pixels H * W * C values in [0, 1], row-major HWC.
 * @throws RangeError on a wrong length or a pixel outside [0, 1].
 * @example inspect(model, new Float32Array(784)).layers.at(-1)!.true // the network's local Lipschitz constant
 */
export function inspect(model: TransformerClassifier, pixels: ArrayLike<number>): Inspection {
  const x = imageTensor(model, pixels);
  try {
    // The attention probabilities as computed (float32), not analyze's rounded copy for reports.
    const { logits, trace } = model.forward(x, { trace: true });
    let probabilities: number[];
    let maps: number[][][];
    let n: number;
    try {
      probabilities = Array.from(tf.tidy(() => tf.softmax(logits)).dataSync());
      n = trace!.blocks[0].attn.p.shape[2] as number;
      maps = trace!.blocks.map((block) => {
        const p = block.attn.p.dataSync();
        const heads = block.attn.p.shape[1] as number;
        return Array.from({ length: heads }, (_, h) =>
          Array.from(p.subarray(h * n * n, (h + 1) * n * n)),
        );
      });
    } finally {
      logits.dispose();
      disposeTrace(trace);
    }
    const rowSigma = maps.map((heads) =>
      heads.map((map) => Array.from({ length: n }, (_, q) => sigmaFromRow(map, q * n, n))),
    );
    const a = analyze(model, x, {
      truth: { heads: false, blocks: true, network: true },
      maxIterations: 300,
    });
    const pick = (bounds: Record<HeadVariant, number[]>) =>
      Object.fromEntries(
        ALL_VARIANTS.filter((v) => v in bounds).map((v) => [v, bounds[v][0]]),
      ) as Partial<Record<HeadVariant, number>>;
    const layers: LayerBounds[] = [
      ...a.blocks.map((b, i) => ({ name: `block ${i}`, true: b.true[0], bounds: pick(b.bounds) })),
      { name: "network", true: a.network.true[0], bounds: pick(a.network.bounds) },
    ];
    return { probabilities, n, maps, rowSigma, layers };
  } finally {
    x.dispose();
  }
}

/**
 * FGSM or PGD (l_inf, pixels clipped to [0, 1]) against class `label` at each eps: the
 * prediction and the margin at each adversarial image, and the adversarial image at the last eps.
 *
 * @param eps radii in [0, 1], ascending; 0 gives the clean image.
 * @param steps PGD's steps (step size 2.5 eps / steps, random start, seed 0); FGSM ignores it.
 * @throws RangeError on a bad image, label or eps (as fgsm and pgd).
 * @example attackCurve(model, pixels, 7, "pgd", [0, 0.05, 0.1], 10).points[2].margin
 */
export function attackCurve(
  model: TransformerClassifier,
  pixels: ArrayLike<number>,
  label: number,
  attack: "fgsm" | "pgd",
  eps: readonly number[],
  steps: number,
): { points: AttackPoint[]; adversarial: number[] } {
  const x = imageTensor(model, pixels);
  const points: AttackPoint[] = [];
  let adversarial: number[] = Array.from(pixels);
  try {
    for (const e of eps) {
      const adv =
        e === 0
          ? x.clone()
          : attack === "fgsm"
            ? fgsm(model, x, [label], { eps: e })
            : pgd(model, x, [label], { eps: e, steps, seed: 0 });
      const logits = Array.from(tf.tidy(() => model.forward(adv).logits).dataSync());
      adversarial = Array.from(adv.dataSync());
      adv.dispose();
      const others = logits.filter((_, k) => k !== label);
      const predicted = logits.indexOf(Math.max(...logits));
      points.push({ eps: e, predicted, margin: logits[label] - Math.max(...others) });
    }
  } finally {
    x.dispose();
  }
  return { points, adversarial };
}
