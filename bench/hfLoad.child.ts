// Child process of bench/hf.bench.ts: loads one Hugging Face folder and measures what the
// parent cannot (this process's own peak RSS, untouched by the parent's buffers).
import { tf, useBackend } from "../src/backend.ts";
import { loadHfModel } from "../src/hf/load.ts";
import { networkBounds } from "../src/lipschitz/networkBounds.ts";
import { HEAD_VARIANTS } from "../src/lipschitz/rules/attentionHead.ts";
import type { TransformerClassifier } from "../src/nn/model.ts";
import { disposeTrace } from "../src/nn/trace.ts";

const dir = process.argv[2];
await useBackend("wasm");
const rssBefore = process.memoryUsage().rss;
let t = performance.now();
const { model, config } = await loadHfModel(dir, "bench");
const loadMs = performance.now() - t;
const rssAfterLoad = process.memoryUsage().rss;
const peakAfterLoadMiB = process.resourceUsage().maxRSS / 1024;
if (config.kind !== "vit") throw new Error("bench: a ViT folder is expected");
const vit = model as TransformerClassifier;
const x = tf.randomUniform([1, config.imageSize, config.imageSize, config.channels], 0, 1, "float32", 1);
const forwardOnce = () => {
  const plain = vit.forward(x);
  plain.logits.dataSync();
  plain.logits.dispose();
};
forwardOnce(); // the first call also compiles the wasm kernels
t = performance.now();
forwardOnce();
const forwardMs = performance.now() - t;
const { logits, trace } = vit.forward(x, { trace: true });
logits.dispose();
// Every variant but cov: cov's exact query path costs O(n^2 d_k^2) per head (about 450 s here).
const variants = HEAD_VARIANTS.filter((v) => v !== "cov");
const weights = vit.getWeights();
const source = { config: vit.config, weights };
t = performance.now();
const bounds = networkBounds(source, trace!, { mlp: "relaxed", variants });
// The first call also computes the weights' spectral norms and factors (cached per model).
const firstBoundsMs = performance.now() - t;
t = performance.now();
networkBounds(source, trace!, { mlp: "relaxed", variants });
const boundsMs = performance.now() - t;
disposeTrace(trace!);
const peakRssMiB = process.resourceUsage().maxRSS / 1024;
console.log(
  JSON.stringify({
    parameters: vit.params.entries().reduce((s, [, v]) => s + v.size, 0),
    loadMs,
    forwardMs,
    firstBoundsMs,
    boundsMs,
    rssMiB: { beforeLoad: rssBefore / 2 ** 20, afterLoad: rssAfterLoad / 2 ** 20, peakDuringLoad: peakAfterLoadMiB, peak: peakRssMiB },
    networkBound: bounds.examples[0].network,
  }),
);
model.dispose();
