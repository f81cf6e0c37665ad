import type { AttackPoint, Inspection, TokenizerDocument, Tokenized } from "./compute.ts";

/**
 * Messages between the explorer page and its web worker (worker.ts). Each request carries an
 * id; the worker answers it with a result or an error carrying the same id, after zero or
 * more progress messages.
 */

/** What the page asks the worker. */
export type ExplorerRequest =
  | { id: number; kind: "load"; config: unknown; weights: ArrayBuffer; name: string }
  | { id: number; kind: "backend"; name: ExplorerBackend }
  | { id: number; kind: "inspect"; pixels: number[] }
  | {
      id: number;
      kind: "attack";
      pixels: number[];
      label: number;
      attack: "fgsm" | "pgd";
      eps: number[];
      steps: number;
    }
  // A text model's page: the model with its tokenizer, a text to read, and its ids to attack.
  | {
      id: number;
      kind: "load-text";
      config: unknown;
      weights: ArrayBuffer;
      tokenizer: TokenizerDocument;
      name: string;
    }
  | { id: number; kind: "inspect-text"; text: string }
  | {
      id: number;
      kind: "attack-text";
      ids: number[];
      label: number;
      attack: "fgsm" | "pgd";
      norm: "l2" | "linf";
      eps: number[];
      steps: number;
    };

/**
 * The tfjs backends the page offers: wasm (the default; XNNPACK with SIMD, its .wasm files served
 * beside the page, as attnlip's Node runs by default), cpu (plain JavaScript, float32 exactly as
 * attnlip's Node runs on cpu) and webgl (the GPU, through webgl.js, loaded when picked).
 */
export type ExplorerBackend = "cpu" | "wasm" | "webgl";

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
  | { id: number; kind: "backend-ready"; name: ExplorerBackend; seconds: number }
  | { id: number; kind: "inspected"; result: Inspection; seconds: number }
  | { id: number; kind: "attacked"; points: AttackPoint[]; adversarial: number[]; seconds: number }
  | {
      id: number;
      kind: "loaded-text";
      classes: number;
      maxLength: number;
      blocks: number;
      heads: number;
    }
  | {
      id: number;
      kind: "inspected-text";
      tokenized: Tokenized;
      result: Inspection;
      seconds: number;
    }
  | {
      id: number;
      kind: "attacked-text";
      points: AttackPoint[];
      tokenNorm: number;
      seconds: number;
    }
  | { id: number; kind: "error"; message: string };
