// `npm run kube-api -- [--port N] [--seed FILE.yaml ...] [--plain-http] [--require-rbac]`: runs the
// in-memory API server until SIGTERM/SIGINT. The single line `kubeconfig: <path>` on stdout is
// the "ready" signal scripts wait for, so nothing else is printed to stdout. It serves HTTPS by
// default because kubectl (client-go) sends bearer tokens only over TLS.
import { startKubeApi } from "./server.js";
import { stopOnSignal } from "./stop-on-signal.js";

function usage(msg: string): never {
  process.stderr.write(`kube-api: ${msg}\nusage: kube-api [--port N] [--seed FILE.yaml ...] [--plain-http] [--require-rbac]\n`);
  process.exit(2);
}

function parseArgs(argv: string[]): { port?: number; seedFiles: string[]; tls: boolean; requireRbac: boolean } {
  const out = { port: undefined as number | undefined, seedFiles: [] as string[], tls: true, requireRbac: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = () => inline ?? argv[++i] ?? usage(`${flag} needs a value`);
    switch (flag) {
      case "--port": {
        const p = Number(value());
        if (!Number.isInteger(p) || p < 0 || p > 65535) usage("--port must be an integer 0-65535");
        out.port = p;
        break;
      }
      case "--seed":
        out.seedFiles.push(value());
        break;
      case "--plain-http":
        out.tls = false;
        break;
      case "--require-rbac":
        out.requireRbac = true;
        break;
      default:
        usage(`unknown argument ${argv[i]}`);
    }
  }
  return out;
}

const args = parseArgs(process.argv.slice(2));
const api = await startKubeApi({ port: args.port, seedFiles: args.seedFiles, tls: args.tls, requireRbac: args.requireRbac }).catch((err: Error) => {
  process.stderr.write(`kube-api: ${err.message}\n`);
  process.exit(1);
});
process.stderr.write(`kube-api: serving ${api.url}\n`);
process.stdout.write(`kubeconfig: ${api.kubeconfigPath}\n`);

stopOnSignal(api);
