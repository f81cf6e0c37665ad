import { modelPreset } from "../../src/nn/config.ts";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadDataset, type ImageDataset } from "../../src/data/dataset.ts";
import type { ModelConfigInput } from "../../src/nn/config.ts";
import type { TrainOptions } from "../../src/train/trainer.ts";

/** The tiny ViT of the training tests: the `vit-micro` preset (patch 7, 17 tokens, d 16, 2 heads, 1 block). */
export const TINY: ModelConfigInput = modelPreset("vit-micro");

const cache = new Map<string, ImageDataset>();

/** Embedded MNIST with `train` training and `test` test digits (split seed 0), cached. */
export async function digits(train: number, test: number): Promise<ImageDataset> {
  const key = `${train}/${test}`;
  if (!cache.has(key)) cache.set(key, await loadDataset("mnist", { seed: 0, limit: train, testLimit: test }));
  return cache.get(key)!;
}

/** A fresh temporary folder. */
export function tempDir(prefix = "attnlip-train-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Quiet options shared by the tests. */
export const QUIET: Partial<TrainOptions> = { progress: "none", log: () => {}, warn: () => {} };
