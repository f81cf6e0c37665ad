import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { deserialize, serialize } from "node:v8";
import {
  useWeightCacheStore,
  weightCacheStore,
  type WeightCacheStore,
} from "../lipschitz/weightCache.ts";

/**
 * The Node side of src/lipschitz/weightCache.ts: weight-only quantities (spectral norms of the
 * weight matrices, each head's Gram matrices and factors) kept in memory for the process and on
 * disk in node_modules/.cache/attnlip/weights/ (in a checkout or wherever that folder can be
 * written; as the MNIST and corpus caches), one file per quantity, named by a SHA-256 digest of
 * what it is, the exact bytes of the weights it comes from, and the text of the files that
 * compute it (linalg and the head rules: a changed formula gives other names, so a stale value
 * is never read). A checkpoint's norms are therefore computed by its first analysis and read by
 * every later one, in every process and worker. Without a writable folder the values are kept
 * in memory only; deleting the folder is always safe.
 */

/** Files whose text is part of every key (relative to this file; .ts in a checkout, .js built). */
const COMPUTING_FILES = [
  "../lipschitz/linalg",
  "../lipschitz/rules/attentionHead",
  "../lipschitz/rules/l2Head",
  "../lipschitz/rules/weightNorms",
  "../lipschitz/rules/output",
  "../lipschitz/rules/embedding",
  "../lipschitz/weightCache",
  "./weightCacheStore",
];

/** Entries kept in memory at most (a BERT-base has about 200); the oldest go first. */
const MEMORY_ENTRIES = 4096;

/** Options of {@link enableWeightCache}. */
export interface WeightCacheOptions {
  /** The folder of the files (default node_modules/.cache/attnlip/weights beside attnlip); null: memory only. */
  dir?: string | null;
}

/**
 * A store for src/lipschitz/weightCache.ts that keeps values in memory and, when `dir` can be
 * written, on disk (written atomically: a reader sees a whole file or none).
 *
 * @param options.dir see {@link WeightCacheOptions}.
 * @returns the store (install it with useWeightCacheStore, or call {@link enableWeightCache}).
 * @example useWeightCacheStore(weightCacheOnDisk({ dir: "/tmp/norms" }));
 */
export function weightCacheOnDisk(options: WeightCacheOptions = {}): WeightCacheStore {
  const here = fileURLToPath(import.meta.url);
  let version: string | null = null;
  try {
    const h = createHash("sha256");
    for (const f of COMPUTING_FILES)
      h.update(readFileSync(join(dirname(here), `${f}${extname(here)}`)));
    version = h.digest("hex");
  } catch {
    version = null; // the sources cannot be read: keep values in memory only
  }
  const dir =
    options.dir === undefined
      ? join(dirname(here), "..", "..", "node_modules", ".cache", "attnlip", "weights")
      : options.dir;
  const memory = new Map<string, unknown>();
  const remember = (key: string, value: unknown) => {
    memory.set(key, value);
    if (memory.size > MEMORY_ENTRIES) memory.delete(memory.keys().next().value as string);
  };
  const fileOf = (key: string) =>
    dir === null || version === null ? null : join(dir, `${key}.v8`);
  return {
    key(what, arrays) {
      const h = createHash("sha256");
      h.update(`${version ?? "no-version"}\n${what}\n`);
      for (const a of arrays) {
        h.update(`${a.constructor.name}:${a.length}\n`);
        h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
      }
      return h.digest("hex");
    },
    get(key) {
      if (memory.has(key)) return memory.get(key);
      const file = fileOf(key);
      if (file === null || !existsSync(file)) return undefined;
      try {
        const value = deserialize(readFileSync(file)) as unknown;
        remember(key, value);
        return value;
      } catch {
        return undefined; // damaged: computed again and written anew
      }
    },
    set(key, value) {
      remember(key, value);
      const file = fileOf(key);
      if (file === null) return;
      try {
        mkdirSync(dirname(file), { recursive: true });
        const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
        writeFileSync(temporary, serialize(value));
        renameSync(temporary, file); // atomic: another process reads the whole file or none
      } catch {
        // a read-only install: memory only
      }
    },
  };
}

/**
 * Installs {@link weightCacheOnDisk} as the weight-quantity store of this process (once: a
 * second call keeps the store that is there). The CLI, the worker threads and `runAnalyze` call
 * it; library users may too.
 *
 * @example enableWeightCache(); networkBounds(model, trace); // the first call computes the norms
 */
export function enableWeightCache(options: WeightCacheOptions = {}): void {
  if (weightCacheStore() !== null) return;
  useWeightCacheStore(weightCacheOnDisk(options));
}
