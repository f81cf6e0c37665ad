import { tf } from "../backend.ts";
import { analyze } from "../analysis/analyze.ts";
import { inRegistryOrder } from "../lipschitz/variants/index.ts";
import type { HeadVariant } from "../lipschitz/rules/headTypes.ts";
import { createModel } from "../nn/create.ts";
import { parseModelConfig, type VitConfig } from "../nn/config.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { disposeTrace } from "../nn/trace.ts";
import { fgsm } from "../robustness/fgsm.ts";
import { pgd } from "../robustness/pgd.ts";
import { decodeSafetensors } from "../io/safetensors.ts";
import { checkHfConfig, hfModelFromParts } from "../hf/fromParts.ts";
import { sigmaFromRow } from "../softmax/sigma.ts";
import { predictedClass } from "../util/predictedClass.ts";
import { WordTokenizer, type TextTokenizer } from "../data/text/tokenizer.ts";
import { HfTokenizer } from "../hf/tokenizer.ts";
import type { TextConfig } from "../nn/config.ts";
import type { TextClassifier } from "../nn/textClassifier.ts";
import { fgsmEmbedding, pgdEmbedding, embeddingLogits } from "../robustness/embedding.ts";

/**
 * What the explorer page computes (in its web worker): a ViT from a config and safetensors
 * bytes, its prediction, attention maps and every bound variant beside the true values at one
 * image, and an attack's effect as eps grows. Plain data in and out, so that the same
 * functions run in a worker, in Node and in tests. A text model the same way at one text's
 * token ids (read with its own tokenizer, rebuilt on the page), attacked on its token
 * embeddings.
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
  /** The logits, [classes] (float32 values). */
  logits: number[];
  /**
   * The predicted class: the argmax of the logits (util/predictedClass.ts), as the attacks take
   * it, not of the probabilities (near-tied logits can give tied float32 probabilities).
   */
  predicted: number;
  /** Softmax of the logits, [classes] (shown beside the prediction). */
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
 * @param kind the kind of model the page shows: "vit" (28 x 28 grey images), or "text" (a
 *   text classifier, attnlip's or an imported BERT / GPT-2).
 * @throws ConfigError on an invalid attnlip config; HfImportError on a Hugging Face config or
 *   tensors attnlip does not import; RangeError on a model of the other kind or another image size;
 *   SafetensorsError on malformed bytes; Error from setWeights naming a missing or misshapen tensor.
 * @example const model = modelFromBytes(JSON.parse(configText), new Uint8Array(await file.arrayBuffer()));
 */
export function modelFromBytes(
  config: unknown,
  weights: Uint8Array,
  name = "the model",
  kind: "vit" | "text" = "vit",
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
  if (kind === "text" && parsed.kind !== "text")
    throw new RangeError(
      `explore: ${name} is a ${parsed.kind} model; this page shows a text model (run attnlip explore on the image model for its own page)`,
    );
  if (kind === "vit" && parsed.kind !== "vit")
    throw new RangeError(
      `explore: ${name} is a ${parsed.kind} model; the explorer shows image models (ViTs)`,
    );
  if (parsed.kind === "vit" && (parsed.imageSize !== 28 || parsed.channels !== 1))
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
    return inspectTensor(model, x, null);
  } finally {
    x.dispose();
  }
}

/** A model's prediction at one input, as the explorer shows it. */
export type Prediction = Pick<Inspection, "logits" | "predicted" | "probabilities">;

/**
 * The prediction alone, as {@link inspect} shows it: the logits at one image, their argmax
 * (the predicted class) and their softmax, without the bounds (milliseconds).
 *
 * @param pixels as {@link inspect}'s.
 * @throws RangeError on a wrong length or a pixel outside [0, 1]; NonFiniteError when the
 *   logits hold NaN or +Infinity (util/predictedClass.ts).
 * @example predict(model, pixels).predicted // 0 <= class < classes
 */
export function predict(model: TransformerClassifier, pixels: ArrayLike<number>): Prediction {
  const x = imageTensor(model, pixels);
  try {
    return predictionAt(model, x, null);
  } finally {
    x.dispose();
  }
}

/** The logits, their argmax and their softmax at a model input (the page's prediction). */
function predictionAt(
  model: TransformerClassifier,
  x: tf.Tensor,
  mask: tf.Tensor | null,
): Prediction {
  const logits = model.forward(x, { mask }).logits;
  try {
    const values = Array.from(logits.dataSync());
    const probabilities = Array.from(tf.tidy(() => tf.softmax(logits)).dataSync());
    return { logits: values, predicted: predictedClass(values, "explore"), probabilities };
  } finally {
    logits.dispose();
  }
}

/** {@link inspect} at a model input: an image [1, H, W, C], or token ids [1, n] with their mask. */
function inspectTensor(
  model: TransformerClassifier,
  x: tf.Tensor,
  mask: tf.Tensor | null,
): Inspection {
  // The attention probabilities as computed (float32), not analyze's rounded copy for reports.
  const { logits, trace } = model.forward(x, { trace: true, mask });
  let probabilities: number[];
  let values: number[];
  let maps: number[][][];
  let n: number;
  try {
    values = Array.from(logits.dataSync());
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
    ...(mask === null ? {} : { mask }),
    truth: { heads: false, blocks: true, network: true },
    maxIterations: 300,
  });
  const pick = (bounds: Record<HeadVariant, number[]>) =>
    Object.fromEntries(
      inRegistryOrder(Object.keys(bounds)).map((v) => [v, bounds[v][0]]),
    ) as Partial<Record<HeadVariant, number>>;
  const layers: LayerBounds[] = [
    ...a.blocks.map((b, i) => ({ name: `block ${i}`, true: b.true[0], bounds: pick(b.bounds) })),
    { name: "network", true: a.network.true[0], bounds: pick(a.network.bounds) },
  ];
  return {
    logits: values,
    predicted: predictedClass(values, "explore"),
    probabilities,
    n,
    maps,
    rowSigma,
    layers,
  };
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
      const predicted = predictedClass(logits, "explore");
      points.push({ eps: e, predicted, margin: logits[label] - Math.max(...others) });
    }
  } finally {
    x.dispose();
  }
  return { points, adversarial };
}

// ---- text models: the page's text box, read with the model's own tokenizer

/** A text model's tokenizer as the command sends it to the page (model/tokenizer.json). */
export interface TokenizerDocument {
  /** The tokenizer.json document: attnlip's word tokenizer (`format: "attnlip-tokenizer"`) or a Hugging Face one. */
  json: unknown;
  /** Hugging Face: tokenizer_config.json's content ({} when none). */
  config?: Record<string, unknown>;
  /** Hugging Face: config.json's `pad_token_id` (the model's pad id, and the padding id when tokenizer.json sets none); absent when none. */
  padId?: number;
}

/**
 * What rebuilds `tokenizer` on the page ({@link tokenizerFromDocument}).
 *
 * @example JSON.stringify(tokenizerDocument(checkpoint.tokenizer))
 */
export function tokenizerDocument(tokenizer: TextTokenizer): TokenizerDocument {
  return tokenizer instanceof HfTokenizer
    ? {
        json: tokenizer.toJSON(),
        config: tokenizer.tokenizerConfig,
        padId: tokenizer.modelPadId ?? undefined,
      }
    : { json: tokenizer.toJSON() };
}

/**
 * The tokenizer of a text model from {@link tokenizerDocument}'s document: the same ids as the
 * tokenizer the command loaded (an attnlip checkpoint's, or a Hugging Face folder's).
 *
 * @throws InputError / HfImportError on a document the tokenizers cannot read; RangeError when
 *   its vocabulary or length does not fit the model.
 * @example const tok = tokenizerFromDocument(await (await fetch("model/tokenizer.json")).json(), config);
 */
export function tokenizerFromDocument(doc: TokenizerDocument, config: TextConfig): TextTokenizer {
  const json = doc.json;
  const attnlip =
    typeof json === "object" &&
    json !== null &&
    (json as { format?: unknown }).format === "attnlip-tokenizer";
  if (!attnlip && (typeof json !== "object" || json === null || Array.isArray(json)))
    throw new RangeError("explore: tokenizer.json: not a JSON object");
  const tokenizer = attnlip
    ? WordTokenizer.fromJSON(json)
    : HfTokenizer.fromJSON(
        json as Record<string, unknown>,
        config.maxLength,
        doc.padId ?? null,
        "explore: tokenizer.json",
        doc.config ?? {},
      );
  if (tokenizer.size > config.vocabSize || tokenizer.maxLength > config.maxLength)
    throw new RangeError(
      `explore: tokenizer.json: ${tokenizer.size} tokens / length ${tokenizer.maxLength} do not fit the model (vocabSize ${config.vocabSize}, maxLength ${config.maxLength})`,
    );
  return tokenizer;
}

/** A text as the model reads it. */
export interface Tokenized {
  /** The token ids, special tokens included, truncated to the tokenizer's length; no padding (one text needs none). */
  ids: number[];
  /** The token of each id. */
  tokens: string[];
  /** The most tokens the model reads (longer texts are cut to it). */
  limit: number;
}

/**
 * A text's token ids as analyze reads it: the tokenizer's padded row (encodeBatch, as the data
 * pipeline encodes texts) trimmed to its real tokens, as analyze trims a batch to its longest
 * text.
 *
 * @throws RangeError on a text without any token (an empty text under a tokenizer that adds no
 *   special token).
 * @example tokenize(tok, "free money").tokens // ["[CLS]", "free", "money"]
 */
export function tokenize(tokenizer: TextTokenizer, text: string): Tokenized {
  const { ids, lengths } = tokenizer.encodeBatch([text]);
  const row = Array.from(ids.subarray(0, lengths[0]));
  if (row.length === 0)
    throw new RangeError("explore: the text has no tokens under this model's tokenizer; type some");
  return { ids: row, tokens: tokenizer.decode(row), limit: tokenizer.maxLength };
}

/** Token ids as [1, n] int32 with their mask (every token real), after checking them. */
function textTensors(model: TransformerClassifier, ids: readonly number[]) {
  const c = model.config;
  if (c.kind !== "text") throw new RangeError("explore: token ids need a text model");
  if (ids.length < 1 || ids.length > c.maxLength)
    throw new RangeError(`explore: 1 to ${c.maxLength} token ids were expected, got ${ids.length}`);
  ids.forEach((id, i) => {
    if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize)
      throw new RangeError(`explore: token ${i} is id ${id}, outside [0, ${c.vocabSize})`);
  });
  return {
    x: tf.tensor2d(Int32Array.from(ids), [1, ids.length], "int32"),
    mask: tf.ones([1, ids.length], "float32"),
  };
}

/**
 * {@link inspect} for a text model at one text's token ids: the prediction, attention maps
 * (n x n, n = the tokens) with each row's sigma, and every bound variant beside the true value
 * per block and for the network, as analyze computes them on these ids with their padding
 * mask (docs/math.md sections 2-3; the network's value is with respect to the sequence
 * entering block 0).
 *
 * @param ids token ids (e.g. {@link tokenize}'s), 1 to maxLength of them.
 * @throws RangeError on a ViT, no ids, too many, or an id outside the vocabulary.
 * @example inspectText(model, tokenize(tok, "free money").ids).layers.at(-1)!.true
 */
export function inspectText(model: TransformerClassifier, ids: readonly number[]): Inspection {
  const { x, mask } = textTensors(model, ids);
  try {
    return inspectTensor(model, x, mask);
  } finally {
    tf.dispose([x, mask]);
  }
}

/**
 * The prediction alone, as {@link inspectText} shows it: the logits at one text's token ids,
 * their argmax (the predicted class) and their softmax, without the bounds.
 *
 * @param ids as {@link inspectText}'s.
 * @throws RangeError as {@link inspectText}; NonFiniteError as {@link predict}.
 * @example predictText(model, tokenize(tok, "free money").ids).probabilities // [p0, p1]
 */
export function predictText(model: TransformerClassifier, ids: readonly number[]): Prediction {
  const { x, mask } = textTensors(model, ids);
  try {
    return predictionAt(model, x, mask);
  } finally {
    tf.dispose([x, mask]);
  }
}

/**
 * FGSM or PGD on a text's token embeddings (attnlip's text attacks, robustness/embedding.ts:
 * l_2 or l_inf eps in embedding units on the embeddings of the real tokens, no clipping)
 * against class `label` at each eps: the prediction and the margin there; and the mean l_2
 * norm of the text's token embeddings, the scale eps compares with.
 *
 * @param eps radii >= 0, ascending; 0 gives the clean text.
 * @param steps PGD's steps (step size 2.5 eps / steps, random start, seed 0); FGSM ignores it.
 * @throws RangeError on bad ids, label or eps (as fgsmEmbedding and pgdEmbedding).
 * @example textAttackCurve(model, ids, 1, "pgd", "l2", [0, 0.1, 0.25], 10).points[2].margin
 */
export function textAttackCurve(
  model: TransformerClassifier,
  ids: readonly number[],
  label: number,
  attack: "fgsm" | "pgd",
  norm: "l2" | "linf",
  eps: readonly number[],
  steps: number,
): { points: AttackPoint[]; tokenNorm: number } {
  const { x, mask } = textTensors(model, ids);
  const text = model as unknown as TextClassifier;
  const points: AttackPoint[] = [];
  try {
    const logitsOf = embeddingLogits(text, mask);
    const tokenNorm = tf.tidy(() => tf.mean(tf.norm(text.tokenEmbeddings(x), 2, -1))).dataSync()[0];
    for (const e of eps) {
      const adv =
        e === 0
          ? text.tokenEmbeddings(x)
          : attack === "fgsm"
            ? fgsmEmbedding(text, { ids: x, mask }, [label], { eps: e, norm })
            : pgdEmbedding(text, { ids: x, mask }, [label], { eps: e, norm, steps, seed: 0 });
      const logits = Array.from(tf.tidy(() => logitsOf(adv)).dataSync());
      adv.dispose();
      const others = logits.filter((_, k) => k !== label);
      const predicted = predictedClass(logits, "explore");
      points.push({ eps: e, predicted, margin: logits[label] - Math.max(...others) });
    }
    return { points, tokenNorm };
  } finally {
    tf.dispose([x, mask]);
  }
}
