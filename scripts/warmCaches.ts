// Run by scripts/test.mjs before the test files: fills the caches every later process reads
// (tfjs's gradient bundle, the MNIST digits, the decoded SpamAssassin corpus, the worker threads'
// bundle, tsx's compiled sources), once. On a fresh clone the test files would otherwise start
// several at a time and each build them again (about 30 s of CPU in all on 2 cores).
import { useBackend } from "../src/backend.ts";
import { embeddedMnistDigest } from "../src/data/mnist.ts";
import { loadSpamCorpus } from "../src/data/text/spamCorpus.ts";
import { WorkerPool } from "../src/parallel/pool.ts";
import "../src/cli/program.ts";

const started = performance.now();
await useBackend("cpu");
embeddedMnistDigest();
await loadSpamCorpus();
const pool = new WorkerPool(1); // bundles the task handlers for worker threads
await pool.close();
console.error(`caches ready in ${((performance.now() - started) / 1000).toFixed(1)} s`);
