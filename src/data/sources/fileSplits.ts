import type { ImageSplit } from "../imageSplit.ts";
import type { ImageSourceData } from "../registry.ts";

type FileSplit = { images: Float32Array; labels: Int32Array; count: number };

/**
 * The splits of a data set stored as a training file and a test file: indices number the
 * training file's records first, then the test file's (held-out checks compare them), and the
 * classes are those the labels use (at least 2). Pixels lie in [0, 1]. `contentDigest` is the
 * digest of the files read (data/identity.ts).
 */
export function fileSplits(
  train: FileSplit,
  test: FileSplit,
  trainShape: ImageSplit["shape"],
  testShape: ImageSplit["shape"],
  contentDigest: string,
): ImageSourceData {
  const pick = (s: FileSplit, offset: number, shape: ImageSplit["shape"]): ImageSplit => ({
    images: s.images,
    labels: s.labels,
    count: s.count,
    shape,
    indices: Int32Array.from({ length: s.count }, (_, i) => offset + i),
  });
  let top = 0;
  for (const l of train.labels) if (l > top) top = l;
  for (const l of test.labels) if (l > top) top = l;
  return {
    train: pick(train, 0, trainShape),
    test: pick(test, train.count, testShape),
    classes: Math.max(2, top + 1),
    range: [0, 1],
    contentDigest,
  };
}
