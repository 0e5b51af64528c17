// Types of what scripts/build-fresh.mjs lends to TypeScript callers (test/support/proc.ts, the bench).
export interface Build {
  outputs: string[];
  sources: string[];
  command: string[];
}
export declare const BUILDS: Build[];
export declare function staleBuilds(outputs?: string[]): { build: Build; why: string }[];
export declare function buildStale(log: (line: string) => void, outputs?: string[]): string;
