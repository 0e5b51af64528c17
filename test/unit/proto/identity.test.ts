// identity.Identity wire compatibility with csi-addons/spec (DESIGN 3.1), from hand-written bytes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  Capability,
  Capability_EncryptionKeyRotation_Type as KeyRotation,
  Capability_NetworkFence_Type as NetworkFence,
  Capability_ReclaimSpace_Type as ReclaimSpace,
  Capability_Service_Type as Service,
  Capability_VolumeGroup_Type as VolumeGroup,
  Capability_VolumeHealer_Type as VolumeHealer,
  Capability_VolumeReplication_Type as VolumeReplication,
  GetCapabilitiesResponse,
  GetIdentityResponse,
  IdentityService,
  ProbeResponse,
} from "../../../proto/gen/identity/identity.js";
import { assertDecodes, assertWire } from "../../support/wire-vectors.js";

describe("identity wire format", () => {
  it("GetCapabilitiesResponse with Service NODE_SERVICE is 0a 04 0a 02 08 02", () => {
    assertWire(GetCapabilitiesResponse, { capabilities: [{ type: { $case: "service", service: { type: Service.NODE_SERVICE } } }] }, "0a 04 0a 02 08 02");
  });

  it("VolumeHealer capabilities sit at oneof field 7 (tag 3a)", () => {
    assertWire(
      GetCapabilitiesResponse,
      {
        capabilities: [
          { type: { $case: "service", service: { type: Service.NODE_SERVICE } } },
          { type: { $case: "volumeHealer", volumeHealer: { type: VolumeHealer.GET_VOLUME_HEALTH } } },
          { type: { $case: "volumeHealer", volumeHealer: { type: VolumeHealer.HEAL_VOLUME } } },
        ],
      },
      "0a 04 0a 02 08 02  0a 04 3a 02 08 01  0a 04 3a 02 08 02",
    );
  });

  // Upstream's oneof slots 1..6 must keep their numbers or upstream capabilities decode as others.
  const eachCapability: [string, Capability, string][] = [
    ["service CONTROLLER_SERVICE (1)", { type: { $case: "service", service: { type: Service.CONTROLLER_SERVICE } } }, "0a 02 08 01"],
    ["reclaim_space ONLINE (2)", { type: { $case: "reclaimSpace", reclaimSpace: { type: ReclaimSpace.ONLINE } } }, "12 02 08 02"],
    ["network_fence GET_CLIENTS_TO_FENCE (3)", { type: { $case: "networkFence", networkFence: { type: NetworkFence.GET_CLIENTS_TO_FENCE } } }, "1a 02 08 02"],
    [
      "volume_replication GET_REPLICATION_DESTINATION_INFO (4)",
      { type: { $case: "volumeReplication", volumeReplication: { type: VolumeReplication.GET_REPLICATION_DESTINATION_INFO } } },
      "22 02 08 02",
    ],
    ["volume_group LIST_VOLUME_GROUPS (5)", { type: { $case: "volumeGroup", volumeGroup: { type: VolumeGroup.LIST_VOLUME_GROUPS } } }, "2a 02 08 06"],
    [
      "encryption_key_rotation ENCRYPTIONKEYROTATION (6)",
      { type: { $case: "encryptionKeyRotation", encryptionKeyRotation: { type: KeyRotation.ENCRYPTIONKEYROTATION } } },
      "32 02 08 01",
    ],
    ["volume_healer HEAL_VOLUME (7)", { type: { $case: "volumeHealer", volumeHealer: { type: VolumeHealer.HEAL_VOLUME } } }, "3a 02 08 02"],
  ];
  for (const [name, capability, hex] of eachCapability) {
    it(`Capability ${name}`, () => assertWire(Capability, capability, hex));
  }

  it("capability enum numbers are upstream's", () => {
    assert.deepEqual([Service.UNKNOWN, Service.CONTROLLER_SERVICE, Service.NODE_SERVICE, ReclaimSpace.OFFLINE, ReclaimSpace.ONLINE], [0, 1, 2, 1, 2]);
    assert.deepEqual([NetworkFence.NETWORK_FENCE, NetworkFence.GET_CLIENTS_TO_FENCE], [1, 2]);
    assert.deepEqual([VolumeReplication.VOLUME_REPLICATION, VolumeReplication.GET_REPLICATION_DESTINATION_INFO], [1, 2]);
    assert.deepEqual(
      [
        VolumeGroup.VOLUME_GROUP,
        VolumeGroup.LIMIT_VOLUME_TO_ONE_VOLUME_GROUP,
        VolumeGroup.DO_NOT_ALLOW_VG_TO_DELETE_VOLUMES,
        VolumeGroup.MODIFY_VOLUME_GROUP,
        VolumeGroup.GET_VOLUME_GROUP,
        VolumeGroup.LIST_VOLUME_GROUPS,
      ],
      [1, 2, 3, 4, 5, 6],
    );
    assert.deepEqual([KeyRotation.ENCRYPTIONKEYROTATION, VolumeHealer.GET_VOLUME_HEALTH, VolumeHealer.HEAL_VOLUME], [1, 1, 2]);
  });

  it("a capability from a newer spec (oneof field 8) decodes as an unknown type, not an error", () => {
    assertDecodes(GetCapabilitiesResponse, "0a 04 42 02 08 01", { capabilities: [{ type: undefined }] });
  });

  it("ProbeResponse: ready unset is empty, ready=false is 0a 00, ready=true is 0a 02 08 01", () => {
    assertWire(ProbeResponse, { ready: undefined }, "");
    assertWire(ProbeResponse, { ready: false }, "0a 00");
    assertWire(ProbeResponse, { ready: true }, "0a 02 08 01");
  });

  it("GetIdentityResponse: name 1, vendor_version 2, manifest 3 as map entries", () => {
    assertWire(
      GetIdentityResponse,
      { name: "drv", vendorVersion: "1.0", manifest: { bootId: "b1" } },
      // 0a 03 "drv" | 12 03 "1.0" | 1a 0c { 0a 06 "bootId" 12 02 "b1" }
      "0a 03 64 72 76  12 03 31 2e 30  1a 0c 0a 06 62 6f 6f 74 49 64 12 02 62 31",
    );
  });

  it("service and method names are upstream's", () => {
    assert.deepEqual(
      Object.values(IdentityService).map((m) => m.path),
      ["/identity.Identity/GetIdentity", "/identity.Identity/GetCapabilities", "/identity.Identity/Probe"],
    );
  });
});
