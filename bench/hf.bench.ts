import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeSafetensors, type TensorToWrite } from "../src/io/safetensors.ts";
import { mulberry32 } from "../src/nn/prng.ts";
import { renderTable } from "../src/util/table.ts";

/** ViT-Base/16 at 224 pixels (86M parameters), as transformers' ViTConfig names it. */
const VIT_BASE = {
  architectures: ["ViTForImageClassification"],
  model_type: "vit",
  hidden_size: 768,
  num_hidden_layers: 12,
  num_attention_heads: 12,
  intermediate_size: 3072,
  hidden_act: "gelu",
  layer_norm_eps: 1e-12,
  image_size: 224,
  patch_size: 16,
  num_channels: 3,
  qkv_bias: true,
  num_labels: 1000,
};

/** The tensors of a random ViT-Base folder, with the Hub's names and shapes (values uniform in +-0.02; LayerNorm scales 1). */
function vitBaseTensors(): Map<string, TensorToWrite> {
  const rand = mulberry32(0);
  const c = VIT_BASE;
  const d = c.hidden_size;
  const tensors = new Map<string, TensorToWrite>();
  const add = (name: string, shape: number[], fill: "random" | "ones" = "random") => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    if (fill === "ones") data.fill(1);
    else for (let i = 0; i < data.length; i++) data[i] = (rand() - 0.5) * 0.04;
    tensors.set(name, { data, shape });
  };
  const tokens = (c.image_size / c.patch_size) ** 2 + 1;
  add("vit.embeddings.patch_embeddings.projection.weight", [d, c.num_channels, c.patch_size, c.patch_size]);
  add("vit.embeddings.patch_embeddings.projection.bias", [d]);
  add("vit.embeddings.cls_token", [1, 1, d]);
  add("vit.embeddings.position_embeddings", [1, tokens, d]);
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `vit.encoder.layer.${i}`;
    for (const m of ["query", "key", "value"]) {
      add(`${p}.attention.attention.${m}.weight`, [d, d]);
      add(`${p}.attention.attention.${m}.bias`, [d]);
    }
    add(`${p}.attention.output.dense.weight`, [d, d]);
    add(`${p}.attention.output.dense.bias`, [d]);
    add(`${p}.layernorm_before.weight`, [d], "ones");
    add(`${p}.layernorm_before.bias`, [d]);
    add(`${p}.layernorm_after.weight`, [d], "ones");
    add(`${p}.layernorm_after.bias`, [d]);
    add(`${p}.intermediate.dense.weight`, [c.intermediate_size, d]);
    add(`${p}.intermediate.dense.bias`, [c.intermediate_size]);
    add(`${p}.output.dense.weight`, [d, c.intermediate_size]);
    add(`${p}.output.dense.bias`, [d]);
  }
  add("vit.layernorm.weight", [d], "ones");
  add("vit.layernorm.bias", [d]);
  add("classifier.weight", [c.num_labels, d]);
  add("classifier.bias", [c.num_labels]);
  return tensors;
}

/**
 * Issue 14's size benchmark: a synthetic random ViT-Base-sized Hugging Face folder (86M
 * parameters, 12 layers, d 768, 197 tokens), imported in a child process that reports its load
 * time, peak RSS (aim: under 1.5 GB), one forward pass and every bound variant but `cov` for one
 * input (relaxed MLP; cov alone took about 450 s here, its exact query path being O(n^2 d_k^2)
 * per head). The file size is the reference the memory is compared with.
 */
export async function benchHf(): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-vit-base-"));
  try {
    const bytes = encodeSafetensors(vitBaseTensors(), { format: "pt" });
    writeFileSync(join(dir, "model.safetensors"), bytes);
    writeFileSync(join(dir, "config.json"), JSON.stringify(VIT_BASE));
    const fileMiB = bytes.byteLength / 2 ** 20;
    const child = join(import.meta.dirname, "hfLoad.child.ts");
    const out = execFileSync(process.execPath, ["--import", "tsx", child, dir], { encoding: "utf8", maxBuffer: 1 << 20 });
    const r = JSON.parse(out.trim().split("\n").pop()!) as {
      parameters: number;
      loadMs: number;
      forwardMs: number;
      firstBoundsMs: number;
      boundsMs: number;
      rssMiB: { beforeLoad: number; afterLoad: number; peakDuringLoad: number; peak: number };
    };
    console.log(`ViT-Base-sized Hugging Face folder (${(r.parameters / 1e6).toFixed(1)}M parameters, model.safetensors ${fileMiB.toFixed(0)} MiB), loaded in a child process (wasm)`);
    console.log(
      renderTable(
        ["what", "value"],
        [
          ["load (config, safetensors, name mapping, weights into tfjs)", `${(r.loadMs / 1000).toFixed(2)} s`],
          ["peak RSS up to the end of the load", `${r.rssMiB.peakDuringLoad.toFixed(0)} MiB (${(r.rssMiB.peakDuringLoad / fileMiB).toFixed(2)}x the file; aim 1536 MiB)`],
          ["peak RSS of the whole child (load, forward, traced forward, bounds)", `${r.rssMiB.peak.toFixed(0)} MiB`],
          ["RSS before load / after load", `${r.rssMiB.beforeLoad.toFixed(0)} / ${r.rssMiB.afterLoad.toFixed(0)} MiB`],
          ["one forward pass, 1 image 224x224x3 (after a warm-up pass)", `${r.forwardMs.toFixed(0)} ms`],
          ["the weights' spectral norms and factors (once per model, cached)", `${((r.firstBoundsMs - r.boundsMs) / 1000).toFixed(1)} s`],
          ["every bound variant but cov, every layer and head, 1 input (relaxed MLP)", `${(r.boundsMs / 1000).toFixed(1)} s (${(r.boundsMs / r.forwardMs).toFixed(0)}x the forward pass)`],
        ],
      ),
    );
    return { fileMiB, ...r };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
