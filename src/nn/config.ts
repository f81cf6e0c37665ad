import { z } from "zod";
import { DuplicateKeyError, parseJsonStrict } from "../io/strictJson.ts";
import { issueReason, valueAt } from "../util/zodIssue.ts";

/**
 * Model configurations: zod schemas, inferred types and named presets.
 * Architecture follows the ViT paper (Dosovitskiy et al. 2021) and a BERT-style text encoder,
 * both in the pre-LN arrangement by default (Xiong et al. 2020); docs/math.md section 3 gives the
 * Lipschitz composition these shapes feed.
 */

const positiveInt = z.number().int().positive();

const encoderFields = {
  /** Model width d. */
  dModel: positiveInt,
  /** Number of attention heads; d_k = dModel / heads. */
  heads: positiveInt,
  /** Number of transformer blocks. */
  blocks: positiveInt,
  /** Hidden width of each block's MLP. */
  mlpHidden: positiveInt,
  /** Number of output classes. */
  classes: z.number().int().min(2),
  /** Whether Q, K and V projections have biases (the output projection always has one). */
  qkvBias: z.boolean().default(true),
  /** LayerNorm placement: "pre" (x + f(LN(x))) or "post" (LN(x + f(x))). */
  norm: z.enum(["pre", "post"]).default("pre"),
  /** LayerNorm epsilon. */
  lnEps: z.number().positive().default(1e-5),
  /** The MLP activation: GELU in its tanh approximation, or exact (erf) GELU as in Hugging Face's "gelu". */
  activation: z.enum(["gelu-tanh", "gelu-erf"]).default("gelu-tanh"),
  /** Dropout rate applied to each sub-layer's output in training mode (0: none). */
  dropout: z.number().min(0).lt(1).default(0),
  /**
   * Attention scores: "dot" (q_i . k_j / sqrt(d_k), Vaswani et al. 2017) or "l2"
   * (-||q_i - k_j||^2 / sqrt(d_k) with tied W_Q = W_K, Kim et al. 2021; src/nn/l2Attention.ts).
   * Absent: "dot" (so configs written before the field existed read unchanged, and dot-product
   * configs are written without it).
   */
  attention: z.enum(["dot", "l2"]).optional(),
};

function checkHeads(cfg: { dModel: number; heads: number }, ctx: z.RefinementCtx): void {
  if (cfg.dModel % cfg.heads !== 0)
    ctx.addIssue({
      code: "custom",
      path: ["dModel"],
      message: `must be divisible by heads (dModel ${cfg.dModel}, heads ${cfg.heads})`,
    });
}

/** Vision transformer on square images, patch embedding by a linear map of flattened patches. */
export const VitConfigSchema = z
  .strictObject({
    kind: z.literal("vit"),
    imageSize: positiveInt,
    channels: positiveInt,
    patchSize: positiveInt,
    ...encoderFields,
    /** A tanh pooler on the CLS token before the head (Hugging Face's ViTModel): `pooler.w`, `pooler.b`. Absent: none. */
    pooler: z.literal("tanh").optional(),
  })
  .superRefine((cfg, ctx) => {
    checkHeads(cfg, ctx);
    if (cfg.imageSize % cfg.patchSize !== 0)
      ctx.addIssue({
        code: "custom",
        path: ["imageSize"],
        message: `must be divisible by patchSize (imageSize ${cfg.imageSize}, patchSize ${cfg.patchSize})`,
      });
  });

/** Text classifier: token + learned position embeddings, encoder, pooled linear head. */
export const TextConfigSchema = z
  .strictObject({
    kind: z.literal("text"),
    vocabSize: positiveInt,
    maxLength: positiveInt,
    ...encoderFields,
    /**
     * "cls": the first token's final state; "mean": the mean over real (unmasked) tokens;
     * "last": the last real token's (GPT-2's sequence classification).
     */
    pooling: z.enum(["cls", "mean", "last"]).default("cls"),
    /** Causal attention (each token attends to itself and earlier tokens only). */
    causal: z.boolean().default(false),
    /**
     * Segment (token-type) embedding rows (BERT): parameter `type` [tokenTypes, d]; every token
     * has type 0, so row 0 is added to each position. Absent: none.
     */
    tokenTypes: positiveInt.optional(),
    /** A LayerNorm on the summed embeddings before block 0 (BERT): `embedding.norm.*`. Absent: false. */
    embeddingNorm: z.boolean().optional(),
    /** Whether a final LayerNorm follows the blocks (BERT's post-LN encoder has none). Absent: true. */
    finalNorm: z.boolean().optional(),
    /** A pooler between pooling and head: "tanh" = tanh(pooled W + b) (BERT): `pooler.w`, `pooler.b`. Absent: none. */
    pooler: z.literal("tanh").optional(),
    /** Whether the head has a bias `head.b` (GPT-2's score has none). Absent: true. */
    headBias: z.boolean().optional(),
  })
  .superRefine((cfg, ctx) => checkHeads(cfg, ctx));

/** Either model kind, told apart by `kind`. */
export const ModelConfigSchema = z.discriminatedUnion("kind", [VitConfigSchema, TextConfigSchema]);

export type VitConfig = z.output<typeof VitConfigSchema>;
export type TextConfig = z.output<typeof TextConfigSchema>;
export type ModelConfig = z.output<typeof ModelConfigSchema>;
/** What a user may write: defaulted fields optional. */
export type ModelConfigInput = z.input<typeof ModelConfigSchema>;

/** Error thrown for an invalid model configuration; the message names each bad field. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

// A seconds-scale ViT for quick looks and tests: patch 7 (17 tokens), d 16, 2 heads, 1 block.
const VIT_MICRO = {
  kind: "vit",
  imageSize: 28,
  channels: 1,
  patchSize: 7,
  dModel: 16,
  heads: 2,
  blocks: 1,
  mlpHidden: 32,
  classes: 10,
} as const satisfies ModelConfigInput;

const VIT_TINY = {
  kind: "vit",
  imageSize: 28,
  channels: 1,
  patchSize: 4,
  dModel: 64,
  heads: 4,
  blocks: 4,
  mlpHidden: 128,
  classes: 10,
  qkvBias: true,
  norm: "pre",
  lnEps: 1e-5,
} as const satisfies ModelConfigInput;

const TEXT_TINY = {
  kind: "text",
  vocabSize: 8000,
  maxLength: 128,
  dModel: 64,
  heads: 4,
  blocks: 2,
  mlpHidden: 128,
  classes: 2,
  pooling: "cls",
} as const satisfies ModelConfigInput;

const PRESETS = {
  "vit-micro": VIT_MICRO,
  "vit-tiny": VIT_TINY,
  // The text counterpart of vit-micro: 48 tokens, d 16, 2 heads, 1 block (the quick text demo's model).
  "text-micro": {
    kind: "text",
    vocabSize: 2000,
    maxLength: 48,
    dModel: 16,
    heads: 2,
    blocks: 1,
    mlpHidden: 32,
    classes: 2,
    pooling: "cls",
  },
  "text-tiny": TEXT_TINY,
  // The presets above with L2 self-attention (tied W_Q = W_K; Kim et al. 2021), nothing else changed.
  "vit-micro-l2": { ...VIT_MICRO, attention: "l2" },
  "vit-tiny-l2": { ...VIT_TINY, attention: "l2" },
  "text-tiny-l2": { ...TEXT_TINY, attention: "l2" },
} as const satisfies Record<string, ModelConfigInput>;

/** Names of the built-in presets. */
export type PresetName = keyof typeof PRESETS;
export const PRESET_NAMES = Object.keys(PRESETS) as PresetName[];

/**
 * Validates a model configuration (an object, or a JSON string) and fills defaults.
 *
 * @returns the parsed configuration.
 * @throws ConfigError whose message lists each problem as `field: reason`, e.g.
 *   `model config: dModel: must be divisible by heads (dModel 64, heads 3)`; a JSON string
 *   that is not JSON or names a key twice is refused (the message names the key).
 */
export function parseModelConfig(json: unknown): ModelConfig {
  let value = json;
  if (typeof json === "string") {
    try {
      value = parseJsonStrict(json); // a field given twice is refused, not read as its last value
    } catch (e) {
      if (e instanceof DuplicateKeyError) throw new ConfigError(`model config: ${e.message}`);
      throw new ConfigError(`model config: not valid JSON (${(e as Error).message})`);
    }
  }
  const result = ModelConfigSchema.safeParse(value);
  if (result.success) return result.data;
  // Absent fields are named together ("missing patchSize, dModel"), not one "expected number,
  // received undefined" each: a config of another program lacks most of them.
  const missing: string[] = [];
  const problems: string[] = [];
  for (const issue of result.error.issues) {
    const field = issue.path.length > 0 ? issue.path.join(".") : "(root)";
    if (
      issue.code === "invalid_type" &&
      issue.path.length > 0 &&
      valueAt(value, issue.path) === undefined
    )
      missing.push(field);
    else problems.push(`${field}: ${issueReason(issue, value)}`);
  }
  if (missing.length > 0) problems.unshift(`missing ${missing.join(", ")}`);
  throw new ConfigError(`model config: ${problems.join("; ")}`);
}

/**
 * A built-in configuration by name: `vit-tiny` (28x28x1 images, patch 4, d 64, 4 heads, 4 blocks,
 * MLP 128, 10 classes), `text-tiny` (vocabulary 8000, length 128, d 64, 4 heads, 2 blocks,
 * MLP 128, 2 classes), and the seconds-scale `vit-micro` (patch 7, d 16, 2 heads, 1 block, MLP
 * 32) and `text-micro` (vocabulary 2000, length 48, d 16, 2 heads, 1 block, MLP 32);
 * `vit-micro-l2`, `vit-tiny-l2` and `text-tiny-l2` are `vit-micro`, `vit-tiny` and `text-tiny`
 * with L2 self-attention (config `attention: "l2"`).
 *
 * @throws ConfigError listing the known presets when `name` is not one of them.
 */
export function modelPreset(name: string): ModelConfig {
  if (!Object.hasOwn(PRESETS, name))
    throw new ConfigError(
      `unknown model preset "${name}"; known presets: ${PRESET_NAMES.join(", ")}`,
    );
  return parseModelConfig(PRESETS[name as PresetName]);
}
