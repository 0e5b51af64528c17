// Command line of csi-addons-driver-stub. Flags in the kubernetes-csi style: `--x=v` and `--x v`.
// Every mistake is a UsageError whose message is the one line main.ts prints before exiting 2.
import { resolve } from "node:path";

export const PROGRAM = "csi-addons-driver-stub";

export const USAGE = `Usage: ${PROGRAM} --name <driver> --addons-endpoint unix://<path> --csi-endpoint unix://<path> [--state FILE] [--call-log FILE] [--no-boot-id]

A reference CSI-Addons driver for tests and demos. Serves identity.Identity,
healer.v1.VolumeHealerNode and the csi-addons spec services (reclaimspace, encryptionkeyrotation,
fence, replication, volumegroup) on the addons socket, and csi.v1 Identity/Node on the CSI socket.

  --name NAME                 driver name reported by GetIdentity and GetPluginInfo (required)
  --addons-endpoint unix://P  CSI-Addons server socket (required)
  --csi-endpoint unix://P     CSI server socket (required)
  --no-boot-id                report no bootId in GetIdentity's manifest: a driver that breaks the
                              contract, whose restarts a sidecar can tell only as reconnections
  --state FILE                JSON state file, re-read when it changes; absent = no volumes,
                              ready, the healer capabilities on and the others off. Shape:
                              {"ready": true, "capabilities": {"getVolumeHealth": true, "healVolume": true,
                               "reclaimSpaceOffline": false, "reclaimSpaceOnline": false,
                               "encryptionKeyRotation": false, "networkFence": false, "getClientsToFence": false,
                               "volumeReplication": false, "replicationDestinationInfo": false, "volumeGroup": false,
                               "controllerService": false},
                               "volumes": {"<id>": {"state": "HEALTHY|ABNORMAL|UNSUPPORTED", "reason": "",
                               "message": "", "heal": "SUCCEED|FAIL|NOT_HEALABLE", "delayMs": 0, "locked": false}},
                               "space": {"<id>": {"usedBytes": 0, "reclaimableBytes": 0, "reclaimedBytes": 0}}
                               (a reclaim of a volume without one answers no usage, as ceph-csi's),
                               "keyRotations": {"<id>": 0}, "fenced": ["<cidr>"],
                               "fenceClients": [{"id": "", "addresses": ["<cidr>"]}],
                               "replication": {"volume:<id>|volumegroup:<id>": {"enabled": false,
                               "role": "primary|secondary", "resyncs": 0, "destination": "", "lastSyncTime": ""}},
                               "groups": {"<group id>": {"name": "", "volumeIds": [], "context": {}}}}
                              The stub writes heals, reclaims, rotations, fences, replication
                              changes and groups back to the file.
  --call-log FILE             append one JSON line per RPC received (secret values replaced by
                              "sha256:" and 16 hex digits of their SHA-256)
  --help                      print this help and exit
  --version                   print the version and exit
`;

export interface StubConfig {
  name: string;
  addonsSocket: string;
  csiSocket: string;
  stateFile?: string;
  callLogFile?: string;
  /** GetIdentity's manifest carries no bootId. */
  noBootId?: boolean;
}

export type Command = { kind: "help" } | { kind: "version" } | { kind: "run"; config: StubConfig };

export class UsageError extends Error {}

const VALUE_FLAGS = ["name", "addons-endpoint", "csi-endpoint", "state", "call-log"] as const;
type ValueFlag = (typeof VALUE_FLAGS)[number];

// sockaddr_un.sun_path is 108 bytes on Linux, including the terminating NUL.
const MAX_SOCKET_PATH = 107;

function socketPath(flag: string, endpoint: string): string {
  if (!endpoint.startsWith("unix://") || endpoint.length === "unix://".length) {
    throw new UsageError(`--${flag}: expected unix://<path>, got "${endpoint}"`);
  }
  const path = resolve(endpoint.slice("unix://".length));
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    throw new UsageError(`--${flag}: socket path ${path} is longer than ${MAX_SOCKET_PATH} bytes`);
  }
  return path;
}

/** Parses argv (without node and script); throws UsageError on any mistake. */
export function parseArgs(argv: readonly string[]): Command {
  const values = new Map<ValueFlag, string>();
  let noBootId = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) throw new UsageError(`unexpected argument "${arg}"`);
    const eq = arg.indexOf("=");
    const flag = arg.slice(2, eq === -1 ? undefined : eq);
    if (flag === "no-boot-id") {
      if (eq !== -1) throw new UsageError(`--${flag} takes no value`);
      noBootId = true;
      continue;
    }
    if (flag === "help" || flag === "version") {
      if (eq !== -1) throw new UsageError(`--${flag} takes no value`);
      return { kind: flag };
    }
    if (!(VALUE_FLAGS as readonly string[]).includes(flag)) throw new UsageError(`unknown flag --${flag}`);
    const value: string | undefined = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    // `--name --state x` is a forgotten value, not a driver called "--state".
    if (value === undefined || (eq === -1 && value.startsWith("--"))) throw new UsageError(`--${flag} needs a value`);
    if (value === "") throw new UsageError(`--${flag} must not be empty`);
    values.set(flag as ValueFlag, value);
  }
  const required = (flag: ValueFlag): string => {
    const v = values.get(flag);
    if (v === undefined) throw new UsageError(`--${flag} is required`);
    return v;
  };
  const name = required("name");
  const addonsSocket = socketPath("addons-endpoint", required("addons-endpoint"));
  const csiSocket = socketPath("csi-endpoint", required("csi-endpoint"));
  if (addonsSocket === csiSocket) throw new UsageError("--addons-endpoint and --csi-endpoint must be different sockets");
  const state = values.get("state");
  const callLog = values.get("call-log");
  return {
    kind: "run",
    config: {
      name,
      addonsSocket,
      csiSocket,
      ...(state !== undefined && { stateFile: resolve(state) }),
      ...(callLog !== undefined && { callLogFile: resolve(callLog) }),
      ...(noBootId && { noBootId }),
    },
  };
}
