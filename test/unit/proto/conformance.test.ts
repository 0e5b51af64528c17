// Our copies of the upstream contracts against the upstream .proto files themselves, to the last
// field: every .proto of the upstream controller (kubernetes-csi-addons internal/proto, package
// `proto`) and of the csi-addons spec (driver-facing packages) beside ours in proto/. Anything of
// ours upstream lacks is allowed only by name, with its reason, in OURS below.
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { numberIn, shapeOf, type Shape } from "../../support/proto-shape.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const reference = join(root, "..", "shared", "reference");

/** Where each upstream contract lives in shared/reference, and where our copy of a file of it is. */
const CONTRACTS = [
  { dir: "kubernetes-csi-addons/internal/proto", ours: (rel: string) => join("proto/proto", rel) },
  { dir: "csi-addons-spec", ours: (rel: string) => join("proto", rel) },
];
const SPEC_PACKAGES = ["encryptionkeyrotation", "fence", "identity", "reclaimspace", "replication", "volumegroup"];

interface Ours {
  /** Our file, from the repository root. */
  file: string;
  /** An entry of proto-shape ("field Message.name", "message Outer.Inner"); a message brings its contents. */
  key: string;
  /** Our declaration, exactly. */
  ours: string;
  /** A field's number in upstream's message: reserved by upstream, or free. */
  upstream?: "reserved" | "free";
  reason: string;
}

const REPLICATION_REQUESTS = [
  "EnableVolumeReplicationRequest",
  "DisableVolumeReplicationRequest",
  "PromoteVolumeRequest",
  "DemoteVolumeRequest",
  "ResyncVolumeRequest",
  "GetVolumeReplicationInfoRequest",
];

/** Why each of our copies keeps the replication requests' deprecated `volume_id = 1`. */
const VOLUME_ID_KEPT: Record<string, string> = {
  "proto/proto/replication.proto":
    "controllers before replication_source (kubernetes-csi-addons 0e3c3633) send the volume as `string volume_id = 1`; " +
    "upstream now reserves 1, so a newer controller never sends it and one sidecar serves both",
  "proto/replication/replication.proto":
    'drivers built before replication_source read the volume from field 1; the spec reserves 1 ("volume_id"), ' +
    "so newer drivers skip it, and the sidecar sends a volume in both",
};

const OURS: Ours[] = [
  ...Object.entries(VOLUME_ID_KEPT).flatMap(([file, reason]) =>
    REPLICATION_REQUESTS.map((m) => ({ file, key: `field ${m}.volume_id`, ours: "string volume_id = 1", upstream: "reserved" as const, reason })),
  ),
  {
    file: "proto/identity/identity.proto",
    key: "field Capability.volume_healer",
    ours: "Capability.VolumeHealer volume_healer = 7 (oneof type)",
    upstream: "free",
    reason: "our extension: a driver offers the healer's GetVolumeHealth/HealVolume in the next free slot of Capability's oneof",
  },
  {
    file: "proto/identity/identity.proto",
    key: "message Capability.VolumeHealer",
    ours: "message",
    reason: "the capability message of our volume_healer extension (its own wire is test/unit/proto/identity.test.ts's)",
  },
];

/** Every .proto of a contract, relative to its folder; the well-known types are protobuf's, not the contract's. */
function protoFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".proto") && !f.startsWith("google/"))
    .sort();
}

const pathOf = (key: string) => key.slice(key.indexOf(" ") + 1);

/** Every difference between upstream's shape and ours, each naming the file, the entry and both sides. */
function differences(file: string, theirs: Shape, ours: Shape, allowed: Ours[]): string[] {
  const out: string[] = [];
  const say = (what: string) => out.push(`${file}: ${what}`);
  if (theirs.pkg !== ours.pkg) say(`package: upstream ${theirs.pkg}, ours ${ours.pkg}`);
  const ourOwn = (key: string) => allowed.some((a) => a.key === key || (a.key.startsWith("message ") && pathOf(key).startsWith(`${pathOf(a.key)}.`)));
  for (const [key, up] of theirs.entries) {
    const mine = ours.entries.get(key);
    if (mine === undefined) say(`${key}: upstream "${up}", ours has none`);
    else if (mine !== up) say(`${key}: upstream "${up}", ours "${mine}"`);
  }
  for (const [key, mine] of ours.entries) {
    if (!theirs.entries.has(key) && !ourOwn(key)) say(`${key}: ours "${mine}", upstream has none (not in the allow-list)`);
  }
  for (const a of allowed) {
    const mine = ours.entries.get(a.key);
    if (mine !== a.ours) say(`allow-listed ${a.key}: listed as "${a.ours}", ours ${mine === undefined ? "has none" : `"${mine}"`}`);
    if (theirs.entries.has(a.key)) say(`allow-listed ${a.key}: upstream has it now, "${theirs.entries.get(a.key)}"`);
    if (a.upstream && mine !== undefined) {
      const path = pathOf(a.key);
      const message = path.slice(0, path.lastIndexOf("."));
      const n = Number(/ = (\d+)/.exec(mine)?.[1]);
      const there = numberIn(theirs, message, n);
      if (there !== a.upstream) say(`allow-listed ${a.key}: number ${n} in upstream's ${message} should be ${a.upstream}, is ${there}`);
    }
  }
  return out;
}

const present = existsSync(reference);

describe(
  "conformance: our .proto files against the upstream controller's and the csi-addons spec's, field by field",
  { skip: !present && `no shared/reference beside the checkout (looked for ${reference})` },
  () => {
    for (const contract of present ? CONTRACTS : []) {
      const dir = join(reference, contract.dir);
      for (const rel of protoFiles(dir)) {
        const file = contract.ours(rel);
        it(`${contract.dir}/${rel} ↔ ${file}`, () => {
          assert.ok(existsSync(join(root, file)), `upstream ${contract.dir}/${rel} has no copy of ours at ${file}`);
          const theirs = shapeOf(readFileSync(join(dir, rel), "utf8"));
          const ours = shapeOf(readFileSync(join(root, file), "utf8"));
          const diffs = differences(
            file,
            theirs,
            ours,
            OURS.filter((a) => a.file === file),
          );
          assert.ok(diffs.length === 0, `${diffs.length} difference(s) from upstream:\n  ${diffs.join("\n  ")}`);
        });
      }
    }

    it("every contract file is compared: the spec's packages are all there, and each of our package `proto` files has an upstream original", () => {
      const spec = protoFiles(join(reference, "csi-addons-spec")).map((f) => shapeOf(readFileSync(join(reference, "csi-addons-spec", f), "utf8")).pkg);
      assert.deepEqual([...new Set(spec)].sort(), SPEC_PACKAGES);
      const upstream = protoFiles(join(reference, CONTRACTS[0]!.dir));
      assert.deepEqual(protoFiles(join(root, "proto/proto")), upstream);
      for (const a of OURS) assert.ok(existsSync(join(root, a.file)), `allow-list names ${a.file}, which is gone`);
    });
  },
);
