// Lint: the checks a type checker does not make. Type-aware rules (typescript-eslint's project
// service reads tsconfig.json) catch promises nobody waits for or handles; the restricted
// syntax keeps the project's own rules (DEVELOPERS' style 4, deploy/'s silenced url.parse warning).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", "proto/gen/", ".tmp/", "bench/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's test/describe return promises the runner itself awaits.
      "@typescript-eslint/no-floating-promises": [
        "error",
        { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["test", "it", "describe", "suite"] }] },
      ],
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
    },
  },
  {
    // The programs themselves: what ships in the image.
    files: ["common/**/*.ts", "controller/**/*.ts", "sidecar/**/*.ts", "driver-stub/**/*.ts"],
    rules: {
      // deploy/ silences Node's url.parse() deprecation warning for the controller's dependencies;
      // our own code must never be what prints it.
      "no-restricted-syntax": [
        "error",
        { selector: "CallExpression[callee.object.name='url'][callee.property.name='parse']", message: "url.parse() is deprecated: use new URL()" },
      ],
      "no-restricted-imports": [
        "error",
        { paths: ["url", "node:url"].map((name) => ({ name, importNames: ["parse"], message: "url.parse() is deprecated: use new URL()" })) },
      ],
      // One typed config object parsed once (process.env read by the entry point only), and no
      // process.exit outside the entry points: a library that exits skips the shutdown order.
      "no-restricted-properties": [
        "error",
        { object: "process", property: "env", message: "read the environment once, in the entry point, and pass it to the config parser" },
        { object: "process", property: "exit", message: "only the entry point exits; throw or return instead" },
      ],
    },
  },
  {
    files: ["sidecar/main.ts", "controller/main.ts", "driver-stub/main.ts", "common/process/entry.ts"],
    rules: { "no-restricted-properties": "off" },
  },
  {
    // Tests and their harnesses shape Kubernetes objects and protocol frames loosely on purpose.
    files: ["test/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
  {
    files: ["**/*.{js,mjs}"],
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        URL: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        Buffer: "readonly",
        AbortController: "readonly",
        performance: "readonly",
      },
    },
  },
);
