import { z } from "zod";
import { JASMIN_NORMS, JASMIN_REDUCTIONS } from "./jasmin.ts";

/**
 * train_state.json, the training state of a checkpoint (src/train/checkpoint.ts writes and
 * reads it, and re-exports both names): epoch, step, seed, data, settings, RNG state and history.
 */

/** What train_state.json holds (validated on load). */
export const TrainStateSchema = z.strictObject({
  format: z.literal("attnlip-train-state"),
  version: z.literal(1),
  /** Epochs completed. */
  epoch: z.number().int().min(0),
  /** Optimizer steps completed. */
  step: z.number().int().min(0),
  /** Planned total epochs of the run (the schedule's length). */
  epochs: z.number().int().min(1),
  /** Seed of the model initialisation, the shuffling stream and the embedded-MNIST split. */
  seed: z.number().int(),
  batchSize: z.number().int().min(1),
  data: z
    .strictObject({
      spec: z.string(),
      limit: z.number().int().min(1).nullable(),
      testLimit: z.number().int().min(1).nullable(),
      trainCount: z.number().int().min(1),
      testCount: z.number().int().min(0),
      /**
       * Test examples left out of the test accuracy because their input equals a training input
       * (data/fingerprints.ts; duplicates in the data): the accuracy is over testCount minus
       * these (absent in older checkpoints).
       */
      testLeftOut: z.number().int().min(0).optional(),
      /**
       * The training inputs' fingerprints in fingerprints.json: how many, and their digest
       * (data/fingerprints.ts fingerprintDigest), so that a file removed, emptied or edited since
       * training is refused (absent in older checkpoints, which have no fingerprints.json).
       */
      fingerprints: z
        .strictObject({ count: z.number().int().min(1), digest: z.string() })
        .optional(),
      /** Text data: the label of each class id (absent for images). */
      labels: z.array(z.string()).optional(),
      /** Text files: the columns / keys read (absent for images and the corpus). */
      textColumn: z.string().nullable().optional(),
      labelColumn: z.string().nullable().optional(),
      /** Text files: the encoding they were read with ("auto", "windows-1252", ...; absent: auto). */
      encoding: z.string().nullable().optional(),
      /**
       * Digests of the training and test indices (data/heldOut.ts indexDigest), so commands that
       * evaluate the checkpoint can check they rebuilt the same split (both absent in older
       * checkpoints; one without the other is refused).
       */
      trainDigest: z.string().optional(),
      testDigest: z.string().optional(),
      /**
       * The content digest of what the data source read (data/identity.ts: the bytes of every
       * file read, or an embedded set's content): the same digest is the checkpoint's own data
       * however the spec is spelled; another one at the same path is data changed since training
       * (absent in older checkpoints).
       */
      contentDigest: z.string().optional(),
      /**
       * The absolute path of the file or folder the spec named at training (absent for embedded
       * sets and older checkpoints), so "the same path" does not depend on the current folder.
       */
      path: z.string().optional(),
    })
    .superRefine((data, ctx) => {
      if ((data.trainDigest === undefined) !== (data.testDigest === undefined))
        ctx.addIssue({
          code: "custom",
          path: [data.trainDigest === undefined ? "trainDigest" : "testDigest"],
          message: `missing while ${data.trainDigest === undefined ? "testDigest" : "trainDigest"} is recorded; both split digests or neither (an edited file cannot be checked against its held-out split)`,
        });
    }),
  jasmin: z.strictObject({
    lambda: z.number().min(0),
    norm: z.enum(JASMIN_NORMS as [string, ...string[]]),
    reduce: z.enum(JASMIN_REDUCTIONS as [string, ...string[]]),
    layers: z.array(z.number().int().min(0)).nullable(),
  }),
  optimizer: z.strictObject({
    name: z.literal("adamw"),
    lr: z.number().min(0),
    minLr: z.number().min(0),
    warmupSteps: z.number().int().min(0),
    totalSteps: z.number().int().min(1),
    weightDecay: z.number().min(0),
    clip: z.number().min(0),
    beta1: z.number(),
    beta2: z.number(),
    epsilon: z.number(),
  }),
  /**
   * Where the weights came from (absent: a fresh initialisation with `seed`). A fine-tuned
   * Hugging Face model: the folder's absolute path and its architecture; its config.json is kept
   * as hf_config.json so that the run exports back to the same format. A run started from
   * another attnlip checkpoint (`train --init`): that folder's absolute path, the epoch and step
   * it had reached, and the SHA-256 of its model.safetensors.
   */
  pretrained: z
    .discriminatedUnion("source", [
      z.strictObject({
        source: z.literal("huggingface"),
        path: z.string(),
        architecture: z.string(),
      }),
      z.strictObject({
        source: z.literal("attnlip"),
        path: z.string(),
        epoch: z.number().int().min(0),
        step: z.number().int().min(0),
        weightsSha256: z.string().regex(/^[0-9a-f]{64}$/),
      }),
    ])
    .optional(),
  /**
   * Training-time augmentation (absent: none): images shifted at random by up to `shift`
   * pixels each way (train/kinds/shift.ts), drawn from the shuffling generator.
   */
  augment: z.strictObject({ shift: z.number().int().min(1) }).optional(),
  /** State of the shuffling generator after the last completed epoch (uint32). */
  rng: z.strictObject({ shuffle: z.number().int().min(0).max(0xffffffff) }),
  /** Training wall time so far, seconds (excluding evaluation and checkpoints). */
  trainSeconds: z.number().min(0),
  /** Per completed epoch: test accuracy and cross-entropy, mean training loss and sigma. */
  history: z.array(
    z.strictObject({
      epoch: z.number().int(),
      step: z.number().int(),
      testAccuracy: z.number().nullable(),
      testCrossEntropy: z.number().nullable(),
      trainLoss: z.number(),
      trainAccuracy: z.number(),
      meanSigma: z.number(),
      seconds: z.number(),
      /** Worker threads that computed the epoch's gradients (absent: 1, this thread). */
      workers: z.number().int().min(2).optional(),
    }),
  ),
});

/** The content of train_state.json. */
export type TrainState = z.output<typeof TrainStateSchema>;
