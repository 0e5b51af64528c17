// fence.FenceController: the fenced CIDRs live in the state file ("fenced"); GetFenceClients
// reports the state file's "fenceClients".
import { isIP } from "node:net";
import {
  FenceClusterNetworkRequest,
  FenceControllerService,
  GetFenceClientsRequest,
  ListClusterFenceRequest,
  UnfenceClusterNetworkRequest,
  type CIDR,
  type FenceControllerServer,
} from "../proto/gen/fence/fence.js";
import { admitAddon, type Driver } from "./driver.js";
import { unary, type RpcEnv } from "./rpc.js";
import { Status, StatusError } from "./status.js";

function isCidr(s: string): boolean {
  const [addr = "", prefix, ...rest] = s.split("/");
  const family = isIP(addr);
  const max = family === 4 ? 32 : 128;
  return family !== 0 && rest.length === 0 && prefix !== undefined && /^\d{1,3}$/.test(prefix) && Number(prefix) <= max;
}

function cidrsOf(cidrs: CIDR[]): string[] {
  if (cidrs.length === 0) throw new StatusError(Status.INVALID_ARGUMENT, "cidrs is required");
  const out = cidrs.map((c) => c.cidr);
  const bad = out.find((c) => !isCidr(c));
  if (bad !== undefined) throw new StatusError(Status.INVALID_ARGUMENT, `${JSON.stringify(bad)} is not a CIDR block`);
  return out;
}

export function fenceServer(driver: Driver, env: RpcEnv): FenceControllerServer {
  const fencing = (name: "fenceClusterNetwork" | "unfenceClusterNetwork", apply: (fenced: string[], cidrs: string[]) => string[]) =>
    unary(env, FenceControllerService[name], name === "fenceClusterNetwork" ? FenceClusterNetworkRequest : UnfenceClusterNetworkRequest, async (req) => {
      admitAddon(driver, "networkFence", "NetworkFence NETWORK_FENCE");
      const cidrs = cidrsOf(req.cidrs);
      driver.store.update((raw) => ({ ...raw, fenced: apply(raw.fenced ?? [], cidrs) }));
      return {};
    });
  return {
    fenceClusterNetwork: fencing("fenceClusterNetwork", (fenced, cidrs) => [...fenced, ...cidrs.filter((c) => !fenced.includes(c))]),
    unfenceClusterNetwork: fencing("unfenceClusterNetwork", (fenced, cidrs) => fenced.filter((c) => !cidrs.includes(c))),
    listClusterFence: unary(env, FenceControllerService.listClusterFence, ListClusterFenceRequest, async () => {
      const state = admitAddon(driver, "networkFence", "NetworkFence NETWORK_FENCE");
      return { cidrs: state.addons.fenced.map((cidr) => ({ cidr })) };
    }),
    getFenceClients: unary(env, FenceControllerService.getFenceClients, GetFenceClientsRequest, async () => {
      const state = admitAddon(driver, "getClientsToFence", "NetworkFence GET_CLIENTS_TO_FENCE");
      return { clients: state.addons.fenceClients.map((c) => ({ id: c.id, addresses: c.addresses.map((cidr) => ({ cidr })) })) };
    }),
  };
}
