import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, extname, join, relative } from "node:path";
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

/** Files whose text is part of every key (below src/ as .ts in a checkout, dist/ as .js built). */
const COMPUTING_FILES = [
  "lipschitz/linalg",
  "lipschitz/maxEigenvalue",
  "lipschitz/floatScale",
  "lipschitz/rules/attentionHead",
  "lipschitz/rules/l2Head",
  "lipschitz/rules/weightNorms",
  "lipschitz/rules/output",
  "lipschitz/rules/embedding",
  "lipschitz/weightCache",
  "analysis/weightCacheStore",
];

/** Entries kept in memory at most (a BERT-base has about 200); the oldest go first. */
const MEMORY_ENTRIES = 4096;

/** Bytes of the SHA-256 digest of the rest of a file, at its start. */
const DIGEST_BYTES = 32;

/** Options of {@link enableWeightCache}. */
export interface WeightCacheOptions {
  /** The folder of the files (default node_modules/.cache/attnlip/weights in attnlip's folder); null: memory only. */
  dir?: string | null;
}

/**
 * attnlip's package folder and a digest of the files that compute the cached quantities, found
 * from the path of the module that asks (this one's): the first folder above it whose
 * package.json is attnlip's; the files in its src/ (a checkout, also when this module runs inside
 * a worker bundle under node_modules/.cache/attnlip/: src/parallel/pool.ts) or, for a .js module
 * under dist/, in dist/ (the built package).
 *
 * @param here an absolute file path.
 * @returns the folder and the hex digest, or null when no folder above `here` is attnlip's or a
 *   file cannot be read (then values are kept in memory only).
 * @example weightCacheSources(fileURLToPath(import.meta.url))?.root
 */
export function weightCacheSources(here: string): { root: string; version: string } | null {
  let root = dirname(here);
  for (;;) {
    const manifest = join(root, "package.json");
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, "utf8")) as { name?: unknown }).name === "attnlip")
          break;
      } catch {
        // not a package manifest we can read: look further up
      }
    }
    const up = dirname(root);
    if (up === root) return null;
    root = up;
  }
  const built = extname(here) === ".js" && !relative(join(root, "dist"), here).startsWith("..");
  const [base, ext] = built ? [join(root, "dist"), ".js"] : [join(root, "src"), ".ts"];
  try {
    const h = createHash("sha256");
    for (const f of COMPUTING_FILES) h.update(readFileSync(join(base, `${f}${ext}`)));
    return { root, version: h.digest("hex") };
  } catch {
    return null; // the sources cannot be read: keep values in memory only
  }
}

/**
 * A store for src/lipschitz/weightCache.ts that keeps values in memory and, when `dir` can be
 * written, on disk (written atomically: a reader sees a whole file or none). A file holds the
 * SHA-256 digest of its contents and its own key: a file whose bytes changed (a flipped bit, a
 * cut file) or that is another key's is read as missing, computed again and written anew.
 *
 * @param options.dir see {@link WeightCacheOptions}.
 * @returns the store (install it with useWeightCacheStore, or call {@link enableWeightCache}).
 * @example useWeightCacheStore(weightCacheOnDisk({ dir: "/tmp/norms" }));
 */
export function weightCacheOnDisk(options: WeightCacheOptions = {}): WeightCacheStore {
  const sources = weightCacheSources(fileURLToPath(import.meta.url));
  const version = sources?.version ?? null;
  const dir =
    options.dir === undefined
      ? sources === null
        ? null
        : join(sources.root, "node_modules", ".cache", "attnlip", "weights")
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
        const bytes = readFileSync(file);
        const body = bytes.subarray(DIGEST_BYTES);
        const digest = createHash("sha256").update(body).digest();
        if (bytes.length <= DIGEST_BYTES || !digest.equals(bytes.subarray(0, DIGEST_BYTES)))
          return undefined; // damaged: computed again and written anew
        const record = deserialize(body) as { key?: unknown; value?: unknown } | null;
        if (typeof record !== "object" || record === null || record.key !== key) return undefined;
        remember(key, record.value);
        return record.value;
      } catch {
        return undefined; // unreadable: computed again and written anew
      }
    },
    set(key, value) {
      remember(key, value);
      const file = fileOf(key);
      if (file === null) return;
      try {
        mkdirSync(dirname(file), { recursive: true });
        const body = serialize({ key, value });
        const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
        writeFileSync(temporary, Buffer.concat([createHash("sha256").update(body).digest(), body]));
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
