import { registerDataSource } from "../registry.ts";
import { cifar10Source } from "./cifar10.ts";
import { idxSource } from "./idx.ts";
import { mnistSource } from "./mnist.ts";
import { spamSource } from "./spam.ts";
import { csvSource, jsonlSource } from "./textFiles.ts";

/**
 * The built-in data sources, one registration each (data/registry.ts). Adding a data set is
 * one file in this folder and one line here.
 */
for (const source of [mnistSource, idxSource, cifar10Source, spamSource, csvSource, jsonlSource]) registerDataSource(source);

export * from "../registry.ts";
