// Checkpoints and Hugging Face folders whose safetensors hold bytes that no tensor covers are
// refused when loaded (issue 38, case 6): the format indexes the whole data section without
// holes, and the reference reader refuses such files (MetadataIncompleteBuffer, InvalidOffset).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  appendFileSync,
  cpSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { train } from "../../src/train/trainer.ts";
import { digits, QUIET, TINY } from "../train/helpers.ts";

const fixture = (name: string) => new URL(`../fixtures/${name}`, import.meta.url).pathname;

/** A copy of a fixture folder in a fresh temporary folder (removed by the caller). */
function copyOf(name: string): { root: string; dir: string } {
  const root = mkdtempSync(join(tmpdir(), "attnlip-holes-"));
  const dir = join(root, "model");
  cpSync(fixture(name), dir, { recursive: true });
  return { root, dir };
}

/** The data section's length: the file minus the 8-byte length field and the header. */
function dataLength(path: string): number {
  const bytes = readFileSync(path);
  return bytes.length - 8 - Number(bytes.readBigUInt64LE(0));
}

for (const name of ["vit-tiny-random", "bert-tiny-random", "gpt2-tiny-random"]) {
  test(`Hugging Face ${name}: model.safetensors with 1,024 bytes appended is refused, naming the file and the range`, async () => {
    await useBackend("cpu");
    const { root, dir } = copyOf(`hf/${name}`);
    try {
      const file = join(dir, "model.safetensors");
      const size = statSync(file).size;
      const data = dataLength(file);
      appendFileSync(file, new Uint8Array(1024));
      await assert.rejects(loadHfModel(dir, "analyze"), (e: Error) => {
        assert.ok(e.message.startsWith(`analyze: ${dir}/model.safetensors: `), e.message);
        assert.ok(
          e.message.includes(
            `data section bytes [${data}, ${data + 1024}) (file bytes [${size}, ${size + 1024})) belong to no tensor`,
          ),
          e.message,
        );
        assert.ok(!e.message.includes("\n"), "one line");
        return true;
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
}

for (const name of ["model.safetensors", "optimizer.safetensors"]) {
  test(`an attnlip checkpoint whose ${name} has 1,024 bytes appended is refused, naming the file and the range`, async () => {
    await useBackend("cpu");
    const root = mkdtempSync(join(tmpdir(), "attnlip-holes-"));
    try {
      const dir = join(root, "run");
      const dataset = await digits(32, 16);
      const run = await train({
        ...QUIET,
        dataset,
        model: TINY,
        epochs: 1,
        batchSize: 32,
        seed: 1,
        out: dir,
      });
      run.model.dispose();
      (await loadCheckpoint(dir)).model.dispose();
      const file = join(dir, name);
      const size = statSync(file).size;
      const data = dataLength(file);
      appendFileSync(file, new Uint8Array(1024));
      // model.safetensors is read by every load; optimizer.safetensors when a run resumes.
      const load =
        name === "model.safetensors"
          ? loadCheckpoint(dir)
          : train({ ...QUIET, resume: dir, dataset, epochs: 2 });
      await assert.rejects(load, (e: Error) => {
        assert.ok(e.message.includes(dir), e.message);
        assert.ok(
          e.message.includes(
            `${name}: data section bytes [${data}, ${data + 1024}) (file bytes [${size}, ${size + 1024})) belong to no tensor`,
          ),
          e.message,
        );
        assert.ok(!e.message.includes("\n"), "one line");
        return true;
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
}

test("a hole between two tensors of a Hugging Face model.safetensors is refused, naming the tensors around it", async () => {
  await useBackend("cpu");
  const { root, dir } = copyOf("hf/gpt2-tiny-random");
  try {
    const file = join(dir, "model.safetensors");
    const bytes = readFileSync(file);
    const n = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + n).toString("utf8")) as Record<
      string,
      { data_offsets?: [number, number] }
    >;
    // Move every tensor after the first 16 bytes along, leaving those 16 bytes to no tensor.
    const sorted = Object.entries(header)
      .filter(([k]) => k !== "__metadata__")
      .sort((a, b) => a[1].data_offsets![0] - b[1].data_offsets![0]);
    const [firstName, first] = sorted[0];
    for (const [, t] of sorted.slice(1))
      t.data_offsets = [t.data_offsets![0] + 16, t.data_offsets![1] + 16];
    const json = Buffer.from(JSON.stringify(header));
    const out = Buffer.alloc(8 + json.length + (bytes.length - 8 - n) + 16);
    out.writeBigUInt64LE(BigInt(json.length), 0);
    json.copy(out, 8);
    const end = first.data_offsets![1];
    bytes.copy(out, 8 + json.length, 8 + n, 8 + n + end);
    bytes.copy(out, 8 + json.length + end + 16, 8 + n + end);
    writeFileSync(file, out);
    await assert.rejects(loadHfModel(dir, "analyze"), (e: Error) => {
      assert.ok(e.message.includes(`data section bytes [${end}, ${end + 16})`), e.message);
      assert.ok(e.message.includes(`between "${firstName}" and "${sorted[1][0]}"`), e.message);
      return true;
    });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
