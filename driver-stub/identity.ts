// The CSI-Addons identity service (identity.Identity) of the addons socket.
import {
  Capability,
  Capability_Service_Type,
  Capability_VolumeHealer_Type,
  GetCapabilitiesRequest,
  GetIdentityRequest,
  IdentityService,
  ProbeRequest,
  type IdentityServer,
} from "../proto/gen/identity/identity.js";
import { identify, probe, type Driver } from "./driver.js";
import { unary, type RpcEnv } from "./rpc.js";

function capabilities(driver: Driver): Capability[] {
  const caps = driver.store.current().capabilities;
  const healer = (type: Capability_VolumeHealer_Type): Capability => ({
    type: { $case: "volumeHealer", volumeHealer: { type } },
  });
  const service = (type: Capability_Service_Type): Capability => ({ type: { $case: "service", service: { type } } });
  return [
    ...(caps.controllerService ? [service(Capability_Service_Type.CONTROLLER_SERVICE)] : []),
    service(Capability_Service_Type.NODE_SERVICE),
    ...(caps.getVolumeHealth ? [healer(Capability_VolumeHealer_Type.GET_VOLUME_HEALTH)] : []),
    ...(caps.healVolume ? [healer(Capability_VolumeHealer_Type.HEAL_VOLUME)] : []),
  ];
}

export function identityServer(driver: Driver, env: RpcEnv): IdentityServer {
  return {
    getIdentity: unary(env, IdentityService.getIdentity, GetIdentityRequest, async () => identify(driver.info)),
    getCapabilities: unary(env, IdentityService.getCapabilities, GetCapabilitiesRequest, async () => ({
      capabilities: capabilities(driver),
    })),
    probe: unary(env, IdentityService.probe, ProbeRequest, async () => probe(driver)),
  };
}
