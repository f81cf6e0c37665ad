import { InputError } from "../../util/errors.ts";
import type { HeadRowStats, HeadVariant } from "../rules/headTypes.ts";

/**
 * The bound-variant registry: every variant of docs/math.md section 2 is one record, registered
 * once by name, with what it reads of the per-head quantities (computed once per head and input
 * by rules/attentionHead.ts or rules/l2Head.ts, only the costly ones that some asked-for variant
 * needs), its value from them, and how tables and charts show it (family, legend note, colour).
 * The maths, the default and accepted lists, analysis.json, the CLI tables, the report and the
 * explorer all take the list from here. Adding a variant is one file in src/lipschitz/variants/
 * and one line in its index.ts (or {@link registerBoundVariant} from outside).
 */

/** How charts draw a variant (src/report/charts.ts: line dash and point shape per family). */
export type VariantFamily = "distribution-aware" | "prior art" | "paper";

/**
 * Costly per-head quantities of dot-product attention a variant may need; the others are always
 * computed. `inputNorms`: ||X||_2 and ||[X, 1]||_2 (an eigenvalue problem of size d per layer);
 * `queryPathExact`: the exact query path, O(n^2 d_k^2) per head; `fusedPaths`: `fused`'s
 * token-resolved paths, O(n^2 d_k^2) per head.
 */
export type DotNeed = "inputNorms" | "queryPathExact" | "fusedPaths";

/**
 * What a dot-product variant reads: one head at one input (docs/math.md section 2; the head is
 * f(X) = P V with P = rowsoftmax(Q K^T / sqrt(d_k)), s_i = sigma(P_i)). Norms are spectral.
 * A quantity whose need was not asked for is NaN.
 */
export interface DotHeadQuantities {
  /** Tokens n and head width d_k. */
  n: number;
  dk: number;
  /** Per-row sigma values, p_(1) and entropies, and which rows are live (have an allowed key). */
  rows: HeadRowStats;
  /** Whether some row is live. */
  anyLive: boolean;
  /** max over live rows of exact sigma, sigma_quad and sigma_top2 (0 without live rows). */
  sMax: { exact: number; quad: number; top2: number };
  /** ||P||, ||W_Q K_c^T||, ||Q W_K^T||, ||V_c|| (K, V centred over the active keys). */
  p: number;
  wqKc: number;
  qWk: number;
  vc: number;
  /** ||W_V||. */
  wv: number;
  /**
   * Whether the head has a query bias and is treated by input augmentation (X~ = [X, 1]); then
   * `a`, `x` and `r` are the augmented head's.
   */
  augmented: boolean;
  /** ||A||, A = W_Q W_K^T / sqrt(d_k) (||A~|| when augmented). */
  a: number;
  /** ||X|| (||[X, 1]|| when augmented); need `inputNorms`. */
  x: number;
  /** max_i ||x_i|| (max_i ||[x_i, 1]|| when augmented). */
  r: number;
  /** The value path ||P|| ||W_V||, the relaxed query path and the key path (`dist`'s). */
  valuePath: number;
  queryPathRelaxed: number;
  keyPath: number;
  /** The exact query path max_i ||W_Q K_c^T J_i V_c|| / sqrt(d_k); need `queryPathExact`. */
  queryPathExact: number;
  /** `fused`'s value, query and key paths; need `fusedPaths`. */
  fusedValuePath: number;
  fusedQueryPath: number;
  fusedKeyPath: number;
  /** Whether a row-wise map before the head or output-row weights after it were given (`fused`). */
  mapped: boolean;
  /** The costly quantities computed for this head. */
  computed: ReadonlySet<DotNeed>;
}

/** Costly per-head quantities of L2 attention a local variant may need: `rowExact`, O(n^2 d_k^2). */
export type L2Need = "rowExact";

/**
 * What a local L2-attention variant reads: one L2 head at one input (docs/math.md section 2,
 * "Local bounds of L2 attention"; rules/l2Head.ts). A quantity whose need was not asked for is NaN.
 */
export interface L2HeadQuantities {
  n: number;
  dk: number;
  rows: HeadRowStats;
  /** ||P|| ||A W_V||. */
  valuePath: number;
  /** The sigma/spread query path and the smallest of the key forms D1, D3, D4. */
  queryDist: number;
  keyDist: number;
  /** The exact query path and the smallest of the key forms K1-K3 and keyDist; need `rowExact`. */
  queryCov: number;
  keyCov: number;
  /** The key forms, 2 / sqrt(d_k) included (k1-k3 need `rowExact`). */
  keyForms: { d1: number; d3: number; d4: number; k1: number; k2: number; k3: number };
  /** ||P||, ||W Q_c^T||, ||V_c||. */
  p: number;
  wQc: number;
  vc: number;
  computed: ReadonlySet<L2Need>;
}

/** What a global L2-attention variant reads of one head: tokens, head width and weight norms. */
export interface L2HeadNorms {
  n: number;
  dk: number;
  /** ||W^{Q,h}||_2 and ||W^{V,h}||_2 ([d, d_k]). */
  wq: number;
  wv: number;
}

/** What every variant record says about itself. */
interface VariantRecord {
  /** Name on the command line, in analysis.json and tables: lower-case letters, digits and "-". */
  name: string;
  /** How charts draw it. */
  family: VariantFamily;
  /** One line for the report's legend table: what it is. */
  note: string;
  /** The heading of docs/math.md that derives it, e.g. "2. One attention head". */
  math: string;
  /**
   * Its colour in charts (a CSS colour, not black, which is the true value's); without one it
   * gets the first unused colour of {@link EXTRA_COLOURS}, by registration.
   */
  colour?: string;
  /** Whether a study's printed table and its report's charts against lambda show it (default false). */
  summary?: boolean;
}

/** A local bound of dot-product attention: a value per head at one input. */
export interface DotBoundVariant extends VariantRecord {
  kind: "dot";
  /** The costly quantities it reads ({@link DotNeed}). */
  needs: readonly DotNeed[];
  /** Its bound on the head's ||Df(X)||_2 from the head's quantities. */
  compute(q: DotHeadQuantities): number;
}

/** A local bound of L2 attention: a value per head at one input. */
export interface L2BoundVariant extends VariantRecord {
  kind: "l2";
  needs: readonly L2Need[];
  compute(q: L2HeadQuantities): number;
  /** Why a dot-product layer refuses it (the InputError's message after the layer's name). */
  dotRefusal: string;
}

/**
 * A global bound of L2 attention (over every input): a value per head from its weight norms,
 * Infinity when keys are masked (a padded query row that is not among its own keys makes the
 * layer not globally Lipschitz).
 */
export interface L2GlobalBoundVariant extends VariantRecord {
  kind: "l2-global";
  compute(w: L2HeadNorms): number;
  dotRefusal: string;
}

/** A bound variant: one record ({@link registerBoundVariant}). */
export type BoundVariantSpec = DotBoundVariant | L2BoundVariant | L2GlobalBoundVariant;

/** The registered variant with its colour resolved. */
export type RegisteredVariant = BoundVariantSpec & { colour: string };

const REGISTRY = new Map<string, RegisteredVariant>();

/**
 * Names analysis.json, its CSV or the charts use beside the variants' (a layer's `true`, `ratio`,
 * `heads`, ..., the network's "composition-floor"), and "all".
 */
const RESERVED = new Set([
  "true",
  "ratio",
  "heads",
  "head",
  "attention",
  "iterations",
  "residual",
  "converged",
  "convergence",
  "ln1",
  "ln2",
  "composition-floor",
  "all",
]);

/**
 * Colours for registered variants without one, in order: beside the built-ins' ten Tableau
 * colours and three more, the light Tableau-20 tones. Past these, colours are spread around
 * the hue circle (golden angle).
 */
export const EXTRA_COLOURS = [
  "#aec7e8",
  "#ffbb78",
  "#98df8a",
  "#ff9896",
  "#c5b0d5",
  "#c49c94",
  "#f7b6d2",
  "#dbdb8d",
  "#9edae5",
  "#637939",
  "#843c39",
  "#7b4173",
];

/** The true value's colour: no variant gets it. */
const BLACK = new Set(["black", "#000", "#000000"]);

/** The k-th colour past {@link EXTRA_COLOURS}: hues a golden angle apart, never black. */
function spreadColour(k: number): string {
  return `hsl(${Math.round((k * 137.508) % 360)}, 60%, 45%)`;
}

/** The first colour of EXTRA_COLOURS, then of the spread hues, that is not in `taken`. */
function unusedColour(taken: ReadonlySet<string>): string {
  for (const c of EXTRA_COLOURS) if (!taken.has(c)) return c;
  for (let k = 0; ; k++) if (!taken.has(spreadColour(k))) return spreadColour(k);
}

/**
 * Registers a bound variant under its name. From then on it is computed by default (for the
 * attention it bounds), accepted by `--variants`, written to analysis.json and shown in the
 * tables, the report (its legend note and colour) and the explorer.
 *
 * @returns the registered record, its colour resolved (its own, or the first unused one).
 * @throws RangeError naming the problem when the name is malformed, reserved or taken, the kind
 *   or family is unknown, compute is not a function, a need is unknown, an L2 variant has no
 *   dotRefusal, or the colour is black.
 * @example
 * registerBoundVariant({
 *   name: "dist-twice", kind: "dot", family: "distribution-aware", needs: [],
 *   note: "twice dist (a toy)", math: "2. One attention head",
 *   compute: (q) => 2 * (q.valuePath + q.queryPathRelaxed + q.keyPath),
 * });
 */
export function registerBoundVariant(spec: BoundVariantSpec): RegisteredVariant {
  const who = "registerBoundVariant";
  if (typeof spec.name !== "string" || !/^[a-z][a-z0-9-]*$/.test(spec.name))
    throw new RangeError(
      `${who}: name must be lower-case letters, digits and "-", starting with a letter, got ${JSON.stringify(spec.name)}`,
    );
  if (RESERVED.has(spec.name))
    throw new RangeError(
      `${who}: "${spec.name}" is reserved (analysis.json uses it beside the variants)`,
    );
  if (REGISTRY.has(spec.name))
    throw new RangeError(`${who}: a variant named "${spec.name}" is already registered`);
  if (!["dot", "l2", "l2-global"].includes(spec.kind))
    throw new RangeError(
      `${who}: ${spec.name}: kind must be "dot", "l2" or "l2-global", got ${JSON.stringify(spec.kind)}`,
    );
  if (typeof spec.compute !== "function")
    throw new RangeError(`${who}: ${spec.name}: compute must be a function`);
  if (!["distribution-aware", "prior art", "paper"].includes(spec.family))
    throw new RangeError(
      `${who}: ${spec.name}: family must be "distribution-aware", "prior art" or "paper", got ${JSON.stringify(spec.family)}`,
    );
  if (typeof spec.note !== "string" || typeof spec.math !== "string")
    throw new RangeError(`${who}: ${spec.name}: note and math must be strings`);
  if (spec.kind !== "dot" && !(typeof spec.dotRefusal === "string" && spec.dotRefusal !== ""))
    throw new RangeError(
      `${who}: ${spec.name}: a variant of L2 attention needs dotRefusal, the reason dot-product layers refuse it`,
    );
  const known: readonly string[] =
    spec.kind === "dot" ? ["inputNorms", "queryPathExact", "fusedPaths"] : ["rowExact"];
  for (const need of spec.kind === "l2-global" ? [] : spec.needs)
    if (!known.includes(need))
      throw new RangeError(
        `${who}: ${spec.name}: unknown need "${need}" (known for kind ${spec.kind}: ${known.join(", ") || "none"})`,
      );
  if (spec.colour !== undefined && BLACK.has(spec.colour.toLowerCase()))
    throw new RangeError(`${who}: ${spec.name}: black is the true value's colour`);
  const taken = new Set([...REGISTRY.values()].map((v) => v.colour));
  const colour = spec.colour ?? unusedColour(taken);
  const registered = { ...spec, colour } as RegisteredVariant;
  REGISTRY.set(spec.name, registered);
  return registered;
}

/**
 * Removes a registered variant (tests, plug-ins); built-ins may be removed too.
 *
 * @returns whether it was registered.
 * @example unregisterBoundVariant("dist-twice") // true after registerBoundVariant's example
 */
export function unregisterBoundVariant(name: string): boolean {
  return REGISTRY.delete(name);
}

/**
 * The registered variants, in registration order (built-ins: docs/math.md section 2's order),
 * optionally of one attention: "dot" (dot-product) or "l2" (L2, local and global).
 *
 * @example boundVariants("l2").map((v) => v.name) // ["l2-dist", "l2-cov", "kim"]
 */
export function boundVariants(attention?: "dot" | "l2"): RegisteredVariant[] {
  const all = [...REGISTRY.values()];
  return attention === undefined ? all : all.filter((v) => attentionOf(v) === attention);
}

/** The attention a variant bounds. */
function attentionOf(v: BoundVariantSpec): "dot" | "l2" {
  return v.kind === "dot" ? "dot" : "l2";
}

/**
 * The registered variants' names, in registration order, optionally of one attention.
 *
 * @example variantNames("dot")[0] // "paper"
 */
export function variantNames(attention?: "dot" | "l2"): HeadVariant[] {
  return boundVariants(attention).map((v) => v.name);
}

/**
 * The registered variant of that name, or undefined.
 *
 * @example findBoundVariant("cov")?.family // "distribution-aware"
 */
export function findBoundVariant(name: string): RegisteredVariant | undefined {
  return REGISTRY.get(name);
}

/**
 * The registered variant of that name.
 *
 * @throws RangeError `WHO: unknown variant "X" (known: ...)`.
 * @example boundVariant("cov").needs // ["queryPathExact"]
 */
export function boundVariant(name: string, who = "boundVariant"): RegisteredVariant {
  const spec = REGISTRY.get(name);
  if (spec === undefined)
    throw new RangeError(
      `${who}: unknown variant ${JSON.stringify(name)} (known: ${variantNames().join(", ")})`,
    );
  return spec;
}

/**
 * `names` in registration order (names not registered after them, in the order given).
 *
 * @example inRegistryOrder(["cov", "paper"]) // ["paper", "cov"]
 */
export function inRegistryOrder(names: Iterable<string>): HeadVariant[] {
  const set = new Set(names);
  return [...variantNames().filter((v) => set.has(v)), ...[...set].filter((v) => !REGISTRY.has(v))];
}

/**
 * Checks a list of head variants: registered names, at least one, no repeats.
 *
 * @returns the list in registration order.
 * @throws RangeError `WHO: variants: ...` naming the unknown or repeated name and the known ones.
 * @example checkVariants(["t3-exact", "paper"], "me") // ["paper", "t3-exact"]
 */
export function checkVariants(variants: readonly string[], who: string): HeadVariant[] {
  const all = variantNames();
  if (!Array.isArray(variants) || variants.length === 0)
    throw new RangeError(`${who}: variants: expected at least one of ${all.join(", ")}`);
  const seen = new Set<string>();
  for (const v of variants) {
    if (!REGISTRY.has(v))
      throw new RangeError(`${who}: variants: unknown variant "${v}" (known: ${all.join(", ")})`);
    if (seen.has(v)) throw new RangeError(`${who}: variants: "${v}" is listed twice`);
    seen.add(v);
  }
  return all.filter((v) => seen.has(v));
}

/**
 * The variants computed when none are asked for: those of dot-product attention, and with
 * `l2` those of L2 attention too, in registration order.
 *
 * @example defaultVariants(true).at(-1) // "kim" (with the built-ins only)
 */
export function defaultVariants(l2: boolean): HeadVariant[] {
  return l2 ? variantNames() : variantNames("dot");
}

/**
 * The costly dot-product quantities the registered variants among `variants` need.
 *
 * @example dotNeeds(["paper", "cov"]) // Set {"inputNorms", "queryPathExact"}
 */
export function dotNeeds(variants: readonly string[]): Set<DotNeed> {
  const out = new Set<DotNeed>();
  for (const v of variants) {
    const spec = REGISTRY.get(v);
    if (spec?.kind === "dot") for (const n of spec.needs) out.add(n);
  }
  return out;
}

/**
 * Throws when `variants` holds a variant of L2 attention (dot-product attention's rules call
 * it): the refusal of the last one asked for in registration order (with the built-ins: `kim`'s
 * before the local L2 variants'). An InputError: the CLI reports it as bad input (`--variants`),
 * in one line with exit code 2.
 *
 * @throws InputError `WHO: REFUSAL`.
 * @example refuseL2Variants(["kim"], "blocks.0.attn") // throws: ... bounds L2 attention only ...
 */
export function refuseL2Variants(variants: readonly string[], who: string): void {
  let last: L2BoundVariant | L2GlobalBoundVariant | undefined;
  for (const name of inRegistryOrder(variants)) {
    const spec = REGISTRY.get(name);
    if (spec !== undefined && spec.kind !== "dot") last = spec;
  }
  if (last !== undefined) throw new InputError(`${who}: ${last.dotRefusal}`);
}

/**
 * The colour of each of `names` in charts: a registered variant's own; for a name not registered
 * here (an analysis.json written where more variants were registered), the first colour of
 * EXTRA_COLOURS (then spread hues) that no other of `names` has. Never black.
 *
 * @example variantColours(["paper", "t3-one"]) // ["#4c78a8", "#f58518"]
 */
export function variantColours(names: readonly string[]): string[] {
  const taken = new Set(names.flatMap((n) => REGISTRY.get(n)?.colour ?? []));
  return names.map((n) => {
    const own = REGISTRY.get(n)?.colour;
    if (own !== undefined) return own;
    const c = unusedColour(taken);
    taken.add(c);
    return c;
  });
}
