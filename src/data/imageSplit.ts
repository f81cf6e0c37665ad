/**
 * One split of an image data set, the type every image source returns (registry.ts) and the
 * rest of data/ reads (dataset.ts re-exports it): types only.
 */

/** One split: images row-major [count, height, width, channels] (HWC) in [0, 1], labels 0..classes-1. */
export interface ImageSplit {
  /** float32 pixels, count * height * width * channels values, HWC per image, in [0, 1]. */
  images: Float32Array;
  /** Class labels, [count]. */
  labels: Int32Array;
  /** Number of examples. */
  count: number;
  /** [height, width, channels] of one image. */
  shape: [number, number, number];
  /**
   * Each example's index in the data set's own numbering, [count] (embedded MNIST: position
   * among the 10,000 digits; IDX / CIFAR-10: the training file's records first, then the test
   * file's), so held-out checks can compare splits (data/heldOut.ts).
   */
  indices: Int32Array;
}
