// Which parameters AdamW decays, over every architecture attnlip builds (issue 38, case 7;
// minGPT #23, transformers #4360): the matrices of linear maps, and nothing else. The optimizer
// decides from the role each parameter was created with (src/nn/params.ts); this test decides
// independently, from the traced forward pass (which names each layer's parameters by what
// they are to it: w/wq/wk/wv/wo/w1/w2 a matrix, b/bq/.../b2 a bias, gamma/beta a LayerNorm's),
// with the parameters that no layer lists (embeddings, added or looked up) not decayed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { PRESET_NAMES } from "../../src/nn/config.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { disposeTrace, eachLayer } from "../../src/nn/trace.ts";
import { AdamW } from "../../src/train/optimizer.ts";

const fixture = (name: string) => new URL(`../fixtures/hf/${name}`, import.meta.url).pathname;

/** The parameters each traced layer names, sorted into linear-map matrices, biases and LayerNorm parameters. */
function rolesFromTrace(model: TransformerClassifier): {
  matrices: Set<string>;
  biases: Set<string>;
  norms: Set<string>;
} {
  const c = model.config;
  const x =
    c.kind === "vit"
      ? tf.zeros([1, c.imageSize, c.imageSize, c.channels])
      : tf.tensor2d([[1, 2, 3]], [1, 3], "int32");
  const { logits, trace } = model.forward(x, { trace: true });
  const out = { matrices: new Set<string>(), biases: new Set<string>(), norms: new Set<string>() };
  eachLayer(trace!.layers, (layer) => {
    for (const [key, name] of Object.entries(layer.params)) {
      if (key === "gamma" || key === "beta") out.norms.add(name);
      else if (/^w[a-z0-9]?$/.test(key)) out.matrices.add(name);
      else if (/^b[a-z0-9]?$/.test(key)) out.biases.add(name);
      else
        assert.fail(
          `layer ${layer.name}: parameter key "${key}" (${name}) is neither a matrix, a bias nor a LayerNorm parameter`,
        );
    }
  });
  disposeTrace(trace!);
  tf.dispose([x, logits]);
  return out;
}

/** The parameters that one AdamW step with zero gradients and weight decay changes. */
function changedByDecay(model: TransformerClassifier): string[] {
  const before = model.getWeights();
  const optimizer = new AdamW(model.params.parameters(), { weightDecay: 0.5 });
  const zeros = model.variables().map((v) => tf.zerosLike(v));
  optimizer.apply(zeros, 0.1);
  tf.dispose(zeros);
  optimizer.dispose();
  const after = model.getWeights();
  return [...before.keys()].filter((name) =>
    before.get(name)!.data.some((v, i) => v !== after.get(name)!.data[i]),
  );
}

const models: [string, () => Promise<TransformerClassifier>][] = [
  ...PRESET_NAMES.map((name): [string, () => Promise<TransformerClassifier>] => [
    `preset ${name}`,
    async () => createModel(name, 0),
  ]),
  ...["vit-tiny-random", "bert-tiny-random", "gpt2-tiny-random"].map(
    (name): [string, () => Promise<TransformerClassifier>] => [
      `Hugging Face ${name}`,
      async () => (await loadHfModel(fixture(name), "train")).model as TransformerClassifier,
    ],
  ),
];

for (const [label, load] of models) {
  test(`${label}: weight decay applies to exactly the matrices of linear maps, not to embeddings, LayerNorm parameters or biases`, async () => {
    await useBackend("cpu");
    const model = await load();
    try {
      const { matrices, biases, norms } = rolesFromTrace(model);
      const names = model.params.names();
      const embeddings = names.filter((n) => !matrices.has(n) && !biases.has(n) && !norms.has(n));
      // What the traced layers do not name are the embeddings (token, position, token-type, CLS), and only those.
      const expectedEmbeddings =
        model.config.kind === "vit"
          ? ["cls", "pos"]
          : ["tok", "pos", ...(model.params.has("type") ? ["type"] : [])];
      assert.deepEqual(embeddings.sort(), expectedEmbeddings.sort());
      const optimizer = new AdamW(model.params.parameters(), { weightDecay: 0.05 });
      const decayed = optimizer.decayedNames();
      optimizer.dispose();
      assert.deepEqual(decayed.sort(), [...matrices].sort());
      // Roles as recorded where the parameters were created.
      for (const n of names)
        assert.equal(
          model.params.role(n),
          matrices.has(n) ? "weight" : biases.has(n) ? "bias" : norms.has(n) ? "norm" : "embedding",
          n,
        );
      // And what a step does: with zero gradients only weight decay moves a parameter.
      assert.deepEqual(changedByDecay(model).sort(), [...matrices].sort());
    } finally {
      model.dispose();
    }
  });
}

test("an imported BERT's token-type embedding [2, d] is not decayed; its pooler and classifier matrices are", async () => {
  await useBackend("cpu");
  const model = (await loadHfModel(fixture("bert-tiny-random"), "train"))
    .model as TransformerClassifier;
  try {
    assert.deepEqual(model.params.get("type").shape, [2, 32]);
    const optimizer = new AdamW(model.params.parameters(), { weightDecay: 0.01 });
    const decayed = new Set(optimizer.decayedNames());
    optimizer.dispose();
    for (const n of [
      "type",
      "tok",
      "pos",
      "embedding.norm.gamma",
      "embedding.norm.beta",
      "pooler.b",
      "blocks.0.attn.bq",
      "blocks.1.ln2.gamma",
    ])
      assert.ok(!decayed.has(n), `${n} is decayed`);
    for (const n of [
      "pooler.w",
      "head.w",
      "blocks.0.attn.wq",
      "blocks.0.attn.wo",
      "blocks.1.mlp.w1",
      "blocks.1.mlp.w2",
    ])
      assert.ok(decayed.has(n), `${n} is not decayed`);
  } finally {
    model.dispose();
  }
});

test("AdamW refuses weight decay for parameters given without roles; without decay, (name, variable) pairs still work", () => {
  const w = tf.variable(tf.ones([2, 2]));
  assert.throws(
    () => new AdamW([["w", w]], { weightDecay: 0.1 }),
    /AdamW: weightDecay 0\.1 needs each parameter's role, "w" has none/,
  );
  const plain = new AdamW([["w", w]]);
  assert.deepEqual(plain.decayedNames(), []);
  plain.dispose();
  w.dispose();
});
