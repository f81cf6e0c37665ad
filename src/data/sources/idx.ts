import { loadIdxDataset } from "../idx.ts";
import type { ImageSource } from "../registry.ts";
import { fileSplits } from "./fileSplits.ts";

/** MNIST-style IDX files in a folder (MNIST, Fashion-MNIST; gzip or plain; data/idx.ts). */
export const idxSource: ImageSource = {
  name: "idx",
  arg: "DIR",
  task: "image",
  summary: "MNIST-style IDX files",
  async load(dir) {
    const sets = await loadIdxDataset(dir!);
    return fileSplits(sets.train, sets.test, [sets.train.height, sets.train.width, 1], [sets.test.height, sets.test.width, 1], sets.contentDigest);
  },
};
