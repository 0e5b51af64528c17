// `npm run bundle`: each program as one tree-shaken ES module, for the image and the bench: the
// sidecar, dist/csi-addons-sidecar.mjs, and the healer controller, dist/csi-addons-healer-controller.mjs.
// Node loads and compiles one file instead of hundreds of modules (start-up time and memory), and the
// image needs no node_modules at all.
//
// What a program imports dynamically (the sidecar's self-signed certificate generator, gRPC
// reflection and its protobufjs, the YAML parser for a kubeconfig) goes into chunks beside it,
// dist/<program>-*.mjs, loaded only when used: every sidecar start used to read and compile all
// 2.1 MB, now 1.2 MB (about 25 ms less from process start to SERVING, measured).
//
// A dependency that reads .proto files next to its own code at run time (@grpc/reflection, through
// __dirname): those files are copied under dist/vendor/ and the module's __dirname points to where
// it would sit there, so its relative paths still resolve.
import { build } from "esbuild";
import { cpSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Each program's source entry → its bundle. */
const PROGRAMS = { "sidecar/main.ts": "dist/csi-addons-sidecar.mjs", "controller/main.ts": "dist/csi-addons-healer-controller.mjs" };
const VENDOR = "dist/vendor";
/** Package → its folder of .proto files that its code reads. */
const PROTO_DIRS = { "@grpc/reflection": "build/proto/grpc" };
const PROTO_PACKAGES = Object.keys(PROTO_DIRS);

const vendorDirname = {
  name: "vendor-dirname",
  setup(b) {
    const filter = new RegExp(`node_modules/(${PROTO_PACKAGES.map((p) => p.replace("/", "\\/")).join("|")})/.*\\.js$`);
    b.onLoad({ filter }, async (args) => {
      const { readFile } = await import("node:fs/promises");
      const source = await readFile(args.path, "utf8");
      const rel = relative(join(root, "node_modules"), dirname(args.path));
      // The bundle's own directory (import.meta.url) + vendor/<package>/<path inside it>.
      const here = `(__bundleDir + ${JSON.stringify(`/vendor/${rel}`)})`;
      return { contents: source.replaceAll("__dirname", here), loader: "js", resolveDir: dirname(args.path) };
    });
  },
};

// An ESM import of a built-in module builds an ES module facade that reads every export, and some
// exports are lazy getters that load more: node:http's WebSocket/CloseEvent/MessageEvent load undici
// (Node's fetch, a 770 KB source and ~80 ms of start-up), node:readline's `promises` loads
// readline/promises. Our own `import ... from "node:..."` become require() calls (CommonJS
// dependencies already do that), which read no export.
const requireBuiltins = {
  name: "require-builtins",
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) => (args.kind === "import-statement" ? { path: args.path, namespace: "require-builtin" } : undefined));
    b.onLoad({ filter: /.*/, namespace: "require-builtin" }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: "js" }));
  },
};

// grpc-js requires @grpc/proto-loader only for channelz and ORCA. Neither program uses them (and
// their .proto files are not in the bundles). Left to it, grpc-js's chunk would import the
// chunk of protobufjs (shared with gRPC reflection, 190 KB) statically, read at every start.
const grpcJsWithoutProtoLoader = {
  name: "grpc-js-without-proto-loader",
  setup(b) {
    b.onResolve({ filter: /^@grpc\/proto-loader$/ }, (args) =>
      args.importer.includes("/node_modules/@grpc/grpc-js/") ? { path: "@grpc/proto-loader", namespace: "not-served" } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "not-served" }, () => ({
      contents: 'throw new Error("the bundled programs use neither channelz nor ORCA (no @grpc/proto-loader for grpc-js)");',
      loader: "js",
    }));
  },
};

// client-node's node-fetch asks for `punycode` (through whatwg-url and tr46), which Node resolves to
// its deprecated built-in: from code outside node_modules, as a bundle is, that prints a
// deprecation warning (DEP0040) on stderr at every start. The userland package of the same API
// (a build-time dependency, pinned) goes into the bundle instead.
const userlandPunycode = {
  name: "userland-punycode",
  setup(b) {
    b.onResolve({ filter: /^(node:)?punycode$/ }, () => ({ path: join(root, "node_modules", "punycode", "punycode.js") }));
  },
};

/**
 * How every program is bundled (the bench bundles its grpc-js relay the same way, so that the relay
 * differs from the sidecar only in what the sidecar does): one tree-shaken ES module for Node.
 */
export const BUNDLE_OPTIONS = {
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  minifySyntax: true,
  // BUNDLE_READABLE=1 keeps one statement per line and the module comments, for reading a CPU profile.
  minifyWhitespace: process.env["BUNDLE_READABLE"] === undefined,
  legalComments: "none",
  logLevel: "warning",
  plugins: [vendorDirname, requireBuiltins, grpcJsWithoutProtoLoader, userlandPunycode],
  // CommonJS dependencies call require() for Node's built-ins; an ES module has none of its own.
  banner: {
    js: [
      'import { createRequire as __createRequire } from "node:module";',
      'import { dirname as __dirnameOf } from "node:path";',
      'import { fileURLToPath as __fileURLToPath } from "node:url";',
      "const require = __createRequire(import.meta.url);",
      "const __bundleDir = __dirnameOf(__fileURLToPath(import.meta.url));",
    ].join("\n"),
  },
};

/** Bundles one program; returns esbuild's metafile. */
async function bundle(source, out) {
  const entry = basename(out, ".mjs");
  // Chunk names carry a content hash: the last build's chunks would stay beside the new ones.
  for (const f of readdirSync(join(root, "dist"), { withFileTypes: true }).filter((e) => e.isFile())) {
    if (f.name.startsWith(`${entry}-`) && f.name.endsWith(".mjs")) rmSync(join(root, "dist", f.name));
  }
  const result = await build({
    ...BUNDLE_OPTIONS,
    absWorkingDir: root,
    entryPoints: { [entry]: source },
    outdir: "dist",
    outExtension: { ".js": ".mjs" },
    splitting: true,
    chunkNames: `${entry}-[name]-[hash]`,
    metafile: true,
  });
  return result.metafile;
}

/** Builds every program into dist/ (what `npm run bundle` runs). */
async function bundleAll() {
  mkdirSync(join(root, "dist"), { recursive: true });
  rmSync(join(root, VENDOR), { recursive: true, force: true });
  for (const [pkg, dir] of Object.entries(PROTO_DIRS)) cpSync(join(root, "node_modules", pkg, dir), join(root, VENDOR, pkg, dir), { recursive: true });

  for (const [source, out] of Object.entries(PROGRAMS)) {
    const started = Date.now();
    const metafile = await bundle(source, out);
    // Node keeps a bundle's source in the heap for lazy compilation: ASCII-only, it is a one-byte
    // string; one other character (esbuild leaves regular expression literals as written) makes the
    // whole file's source a two-byte string: twice the heap it takes (+2.2 MB when the sidecar was one file).
    // (BUNDLE_READABLE keeps comments, which may not be ASCII: for reading a profile only.)
    const outputs = Object.entries(metafile.outputs).filter(([file]) => file.endsWith(".mjs"));
    for (const [file] of outputs) {
      const text = readFileSync(join(root, file), "latin1");
      const nonAscii = process.env["BUNDLE_READABLE"] === undefined && /[^\p{ASCII}]/u.exec(text);
      if (nonAscii) {
        const around = text.slice(Math.max(0, nonAscii.index - 60), nonAscii.index + 20);
        throw new Error(`${file} is not ASCII-only (escape the character in the source): ...${around}...`);
      }
    }
    // What every start loads: the entry and the chunks it imports statically; the rest only when used.
    const atStart = new Set([out]);
    for (const file of atStart) for (const i of metafile.outputs[file].imports) if (i.kind === "import-statement" && !i.external) atStart.add(i.path);
    const kib = (files) => Math.round(files.reduce((n, [, o]) => n + o.bytes, 0) / 1024);
    const inputs = Object.keys(metafile.inputs).length;
    process.stdout.write(
      `${out}: ${kib(outputs.filter(([f]) => atStart.has(f)))} KiB loaded at start, ${kib(outputs.filter(([f]) => !atStart.has(f)))} KiB in chunks loaded when used, from ${inputs} modules, in ${Date.now() - started} ms\n`,
    );
  }
}

// Run as a script (npm run bundle); imported (the bench), it only lends its options. Node resolves
// the main module's symlinks for import.meta.url, so argv[1] is compared resolved too.
if (process.argv[1] && fileURLToPath(import.meta.url) === realpathSync(process.argv[1])) await bundleAll();
