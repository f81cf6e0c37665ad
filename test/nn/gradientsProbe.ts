// Gradients through every op attnlip differentiates (ViT and text classifiers, JaSMin, GELU
// with tanh and erf, LayerNorm, the loss and the input gradient the attacks use), printed as
// SHA-256 digests of their float32 bytes. test/nn/gradients.test.ts runs it with tfjs's
// gradients as attnlip registers them and as the union package @tensorflow/tfjs registers them.
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import { crossEntropy } from "../../src/train/loss.ts";
import { jasminPenalty } from "../../src/train/jasmin.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import { tinyText } from "../helpers/tinyText.ts";

/** Digests of the gradients of loss + JaSMin with respect to every parameter and the input. */
export async function gradientDigests(): Promise<Record<string, string>> {
  await useBackend("cpu");
  const out: Record<string, string> = {};
  const digest = (t: tf.Tensor) =>
    createHash("sha256").update(Buffer.from(t.dataSync().buffer)).digest("hex").slice(0, 16);
  const cases = [
    {
      name: "vit",
      model: createModel(
        {
          ...JSON.parse(JSON.stringify(createModel("vit-micro", 1).config)),
          activation: "gelu-erf",
        },
        1,
      ),
      x: tf.randomUniform([3, 28, 28, 1], 0, 1, "float32", 2),
      labels: tf.tensor1d([1, 7, 3], "int32"),
    },
    {
      name: "text",
      model: createModel(tinyText({ vocabSize: 40, maxLength: 12 }), 1),
      x: tf.tensor2d(
        [
          [1, 5, 9, 3, 0, 0],
          [2, 8, 4, 6, 7, 1],
        ],
        [2, 6],
        "int32",
      ),
      labels: tf.tensor1d([0, 1], "int32"),
    },
  ];
  for (const c of cases) {
    const variables = c.model.variables();
    const { grads } = tf.variableGrads(() => {
      const { logits, trace } = c.model.forward(c.x, { trace: true });
      const loss = tf.add(crossEntropy(logits, c.labels), tf.mul(0.3, jasminPenalty(trace!)));
      disposeTrace(trace);
      return loss as tf.Scalar;
    }, variables);
    for (const [name, g] of Object.entries(grads)) out[`${c.name} ${name}`] = digest(g);
    if (c.name === "vit") {
      const dx = tf.grad((x: tf.Tensor) =>
        crossEntropy(c.model.forward(x).logits, c.labels, "sum"),
      )(c.x);
      out["vit input"] = digest(dx);
    }
  }
  // Which registration ran: the union package loads tfjs-layers (a CommonJS module).
  const cache = createRequire(import.meta.url).cache;
  out.union = String(Object.keys(cache).some((k) => k.includes("tfjs-layers")));
  return out;
}

if (process.argv[2] === "--print") console.log(JSON.stringify(await gradientDigests()));
