import { enableWeightCache } from "../analysis/weightCacheStore.ts";
import { ANALYZE_TASK, BLOCK_TRUTH_TASK } from "./analyzeTask.ts";
import { ATTACK_TASK } from "./attackTask.ts";
import { runRegisteredTask, registerTask } from "./tasks.ts";
import { TRAIN_READY_TASK, TRAIN_STEP_TASK } from "./trainTask.ts";

/**
 * The worker side: every built-in task registered, and the function the pool calls with each
 * task (worker.mjs exports it). A new kind of parallel work is one file with its handler plus
 * one line here.
 */
// Weight-only norms computed once per checkpoint, shared with the main thread and other workers
// through the disk cache (src/analysis/weightCacheStore.ts).
enableWeightCache();
registerTask(ANALYZE_TASK);
registerTask(BLOCK_TRUTH_TASK);
registerTask(ATTACK_TASK);
registerTask(TRAIN_READY_TASK);
registerTask(TRAIN_STEP_TASK);

export { runRegisteredTask as runTask };
