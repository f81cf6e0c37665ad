import type { BackendName } from "../backend.ts";

/**
 * The attack command's flags as its runner reads them (attackCommand.ts checks them,
 * attackRun.ts runs them): types only, so that the runner does not import the command, which
 * loads the runner.
 */

/** Validated flags with defaults filled. */
export interface AttackFlags {
  model: string;
  randomInit: boolean;
  data: string;
  norm: "linf" | "l2";
  eps: number[];
  /** Steps of every iterative attack; null = each attack's own (PGD 10, the APGD attacks 100). */
  steps: number | null;
  /** null = the default rule 2.5 * eps / steps. */
  stepSize: number | null;
  /** Runs from new random starts of the attacks that restart (APGD; APGD-T: per target). */
  restarts: number;
  /** Square's query budget per input. */
  queries: number;
  /** APGD-T's target classes. */
  targets: number;
  /**
   * Run the range check (the attacks again at the radius of the whole input range, for the
   * masking checks); the command's default is on (--no-range-check turns it off).
   */
  rangeCheck: boolean;
  n: number;
  batch: number;
  seed: number;
  /** Registered attack names, in the order they run. */
  attacks: string[];
  backend: BackendName;
  /** Worker threads (parallel/attackTask.ts; undefined: the number of cores). */
  workers?: number;
  out?: string;
  /** Replace an existing attack.json (default: refuse). */
  force?: boolean;
}
