// The V8 heap caps a program needs to stay small, for a start that did not give them: deploy/ sets
// them in NODE_OPTIONS, but a pod spec written elsewhere (Rook rendering its own container, say)
// may not, and V8 then sizes its heap from the machine (the sidecar's RSS after load ~2.5x).
// They cannot go on the image's command line: Node applies NODE_OPTIONS first and the command
// line after, so a flag there would win over NODE_OPTIONS, which must stay able to change them.
// Nor can a running V8 change its heap's bounds. So a start without one of them replaces itself
// (execve: same pid, same stdio, same environment) with a start that has it, before the program is
// loaded; each flag given in NODE_OPTIONS or on the command line is left as given. Costs one more
// Node boot (~30 ms) at start, only then. Node without process.execve (before 22.15) runs as started.

/** Flags as `--name=value`; `--max_old_space_size` is V8's spelling of `--max-old-space-size`. */
export function applyHeapDefaults(defaults) {
  if (typeof process.execve !== "function") return;
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)].map((f) => f.replaceAll("_", "-"));
  // A prefix match: --max-old-space-size-percentage sets the old space too.
  const missing = defaults.filter((d) => !given.some((g) => g.startsWith(d.slice(0, d.indexOf("=")))));
  if (missing.length === 0) return;
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], process.env);
}
