import { InputError } from "../util/errors.ts";
import type { ImageSplit } from "./imageSplit.ts";

/**
 * The data sets attnlip reads, registered by name: one file per source in data/sources/ and
 * one registration line in data/sources/index.ts. The CLI's help text, the spec parser's
 * errors and the loaders all come from this table, so a new source appears everywhere at once.
 *
 * A spec is `NAME` for a source with no argument (an embedded set) or `NAME:ARG` (a folder
 * or a file).
 */

/** What a source's examples are: images (pixels in `range`) or texts with labels. */
export type DataTask = "image" | "text";

/** Options every image source receives. */
export interface ImageLoadOptions {
  /** Seed of a split the source makes itself (embedded sets); file sources ignore it. */
  seed: number;
  /** At most this many training / test examples (the first ones). */
  limit?: number;
  testLimit?: number;
}

/** What an image source loads: both splits, the number of classes and the pixel range. */
export interface ImageSourceData {
  train: ImageSplit;
  test: ImageSplit;
  /** Classes of the labels (labels lie in 0..classes-1). */
  classes: number;
  /** The valid pixel range [low, high] (attacks clip to it; eps limits come from it). */
  range: readonly [number, number];
  /**
   * What was read, as a content digest (data/identity.ts ContentHasher): files, SHA-256 of
   * the bytes of every file read; an embedded set, a digest of its content. Checkpoints record
   * it: the same digest is the same data however the spec is spelled, and another digest at
   * the same path is data changed since training.
   */
  contentDigest: string;
}

/** Options every text source receives (file sources use the columns and encoding). */
export interface TextLoadOptions {
  textColumn?: string;
  labelColumn?: string;
  /** Character encoding of a file ("auto": a UTF-16 byte-order mark, else UTF-8, else Windows-1252). */
  encoding?: string;
  /** Class names to map labels to (a checkpoint's); a label outside them is an error. */
  labelNames?: readonly string[];
}

/** What a text source loads: every record's text and class id, the class names, what was read. */
export interface TextSourceData {
  texts: string[];
  /** Class ids [texts.length] in 0..labelNames.length-1. */
  labels: Int32Array;
  labelNames: string[];
  /** Columns / keys and encoding read from a file (null for an embedded corpus). */
  textColumn: string | null;
  labelColumn: string | null;
  encoding: string | null;
  /** What was read, as a content digest (see {@link ImageSourceData.contentDigest}). */
  contentDigest: string;
  /**
   * File sources: the line where each record starts (1-based), for messages such as the
   * warning about a class with very few examples; absent for an embedded corpus.
   */
  lines?: number[];
}

interface SourceBase {
  /** The spec's name, e.g. "mnist", "idx", "csv". */
  name: string;
  /** The argument after "NAME:" ("DIR", "FILE"), or null for a source without one. */
  arg: "DIR" | "FILE" | null;
  /** A few words for --help, e.g. "MNIST-style IDX files". */
  summary: string;
}

/** An image data source. */
export interface ImageSource extends SourceBase {
  task: "image";
  /** @throws InputError on a missing or malformed file. */
  load(arg: string | null, options: ImageLoadOptions): Promise<ImageSourceData>;
}

/** A text data source. */
export interface TextSource extends SourceBase {
  task: "text";
  /** @throws InputError on a missing or malformed file, a missing column or an unknown label. */
  load(arg: string | null, options: TextLoadOptions): Promise<TextSourceData>;
}

export type DataSource = ImageSource | TextSource;

const SOURCES = new Map<string, DataSource>();

/**
 * Registers a data source under its name.
 *
 * @throws Error when the name is taken or not a plain lower-case word.
 * @example registerDataSource({ name: "fashion", arg: null, task: "image", summary: "...", load: async () => ({ ... }) });
 */
export function registerDataSource(source: DataSource): void {
  if (!/^[a-z][a-z0-9-]*$/.test(source.name)) throw new Error(`registerDataSource: bad name "${source.name}"`);
  if (SOURCES.has(source.name)) throw new Error(`registerDataSource: "${source.name}" is registered already`);
  SOURCES.set(source.name, source);
}

/** Removes a registered source (tests). */
export function unregisterDataSource(name: string): void {
  SOURCES.delete(name);
}

/** The registered sources, in registration order, optionally of one task. */
export function dataSources(task?: DataTask): DataSource[] {
  return [...SOURCES.values()].filter((s) => task === undefined || s.task === task);
}

/** How a source's spec is written: "mnist", "idx:DIR". */
export function specForm(source: DataSource): string {
  return source.arg === null ? source.name : `${source.name}:${source.arg}`;
}

/**
 * The accepted spec forms, for help texts and errors, e.g. "mnist | idx:DIR | cifar10:DIR".
 *
 * @param withSummary add each source's summary in parentheses.
 */
export function specForms(task?: DataTask, withSummary = false): string {
  return dataSources(task)
    .map((s) => (withSummary ? `${specForm(s)} (${s.summary})` : specForm(s)))
    .join(" | ");
}

/** A parsed spec: its source, its argument and its normalised text. */
export interface ParsedSpec {
  source: DataSource;
  arg: string | null;
  /** "NAME" or "NAME:ARG". */
  spec: string;
}

/**
 * Parses a data spec against the registered sources.
 *
 * @param task when given, a source of the other task is an error too.
 * @throws InputError naming the spec and listing the accepted forms.
 * @example parseSpec("idx:data/mnist").source.task // "image"
 */
export function parseSpec(spec: string, task?: DataTask): ParsedSpec {
  const m = /^([a-z][a-z0-9-]*)(?::(.+))?$/.exec(spec);
  const source = m === null ? undefined : SOURCES.get(m[1]);
  const arg = m?.[2] ?? null;
  if (source === undefined || (source.arg === null) !== (arg === null))
    throw new InputError(`data: expected ${specForms(task)}, got "${spec}"`);
  if (task !== undefined && source.task !== task)
    throw new InputError(`data: "${spec}" is ${source.task} data; expected ${task} data: ${specForms(task)}`);
  return { source, arg, spec: arg === null ? source.name : `${source.name}:${arg}` };
}

/** The task of a spec's source, or null when the spec names no registered source. */
export function specTask(spec: string): DataTask | null {
  try {
    return parseSpec(spec).source.task;
  } catch {
    return null;
  }
}
