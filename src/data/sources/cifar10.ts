import { loadCifar10Dataset } from "../cifar10.ts";
import type { ImageSource } from "../registry.ts";
import { fileSplits } from "./fileSplits.ts";

/** CIFAR-10 binary batches in a folder (channel-planar turned into HWC; data/cifar10.ts). */
export const cifar10Source: ImageSource = {
  name: "cifar10",
  arg: "DIR",
  task: "image",
  summary: "CIFAR-10 binary batches",
  async load(dir) {
    const sets = await loadCifar10Dataset(dir!);
    return fileSplits(sets.train, sets.test, [32, 32, 3], [32, 32, 3], sets.contentDigest);
  },
};
