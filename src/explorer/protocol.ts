import type { AttackPoint, Inspection } from "./compute.ts";

/**
 * Messages between the explorer page and its web worker (worker.ts). Each request carries an
 * id; the worker answers it with a result or an error carrying the same id, after zero or
 * more progress messages.
 */

/** What the page asks the worker. */
export type ExplorerRequest =
  | { id: number; kind: "load"; config: unknown; weights: ArrayBuffer; name: string }
  | { id: number; kind: "inspect"; pixels: number[] }
  | {
      id: number;
      kind: "attack";
      pixels: number[];
      label: number;
      attack: "fgsm" | "pgd";
      eps: number[];
      steps: number;
    };

/** What the worker sends back. */
export type ExplorerReply =
  | { id: number; kind: "progress"; text: string }
  | {
      id: number;
      kind: "loaded";
      classes: number;
      imageSize: number;
      channels: number;
      blocks: number;
      heads: number;
    }
  | { id: number; kind: "inspected"; result: Inspection; seconds: number }
  | { id: number; kind: "attacked"; points: AttackPoint[]; adversarial: number[]; seconds: number }
  | { id: number; kind: "error"; message: string };
