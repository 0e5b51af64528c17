// The demo's command line.

export const USAGE = `usage: npm run demo [-- --hold] [-- --keep]
  --hold   keep everything running after the story, until Ctrl-C (to look around with kubectl or grpcurl)
  --keep   keep the temporary directory (sockets, driver state, sidecar and controller logs) after a successful run
`;

export function parseArgs(argv: string[]): { hold: boolean; keep: boolean } {
  const out = { hold: false, keep: false };
  for (const a of argv) {
    if (a === "--hold") out.hold = true;
    else if (a === "--keep") out.keep = true;
    else if (a === "--help" || a === "-h") {
      process.stdout.write(USAGE);
      process.exit(0);
    } else {
      process.stderr.write(`demo: unknown argument ${a}\n${USAGE}`);
      process.exit(2);
    }
  }
  return out;
}
