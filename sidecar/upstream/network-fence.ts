// proto.NetworkFence → fence.FenceController: parameters and CIDRs as given, the named Secret's
// data as secrets (INVALID_ARGUMENT when it cannot be read, as upstream).
import { FenceControllerService } from "../../proto/gen/fence/fence.js";
import type { FenceClientsRequest, FenceClientsResponse, NetworkFenceRequest, NetworkFenceResponse } from "../../proto/gen/proto/networkfence.js";
import type { Next } from "../server/context.js";
import { NEEDS } from "./capabilities.js";
import { namedSecret } from "./named-secret.js";
import { relay, type UpstreamDeps } from "./relay.js";

type FenceHandler = Next<NetworkFenceRequest, NetworkFenceResponse>;

export function networkFenceHandlers(deps: UpstreamDeps): {
  fenceClusterNetwork: FenceHandler;
  unFenceClusterNetwork: FenceHandler;
  getFenceClients: Next<FenceClientsRequest, FenceClientsResponse>;
} {
  const fencing =
    (method: typeof FenceControllerService.fenceClusterNetwork | typeof FenceControllerService.unfenceClusterNetwork): FenceHandler =>
    (req, ctx) =>
      relay(deps, ctx, NEEDS.fence, async (w) => {
        const secrets = await namedSecret(deps, ctx, req, "InvalidArgument");
        ctx.fields["cidrs"] = req.cidrs;
        const request = { parameters: req.parameters, secrets, cidrs: req.cidrs.map((cidr) => ({ cidr })) };
        await deps.driver.call(method, request, w.deadline, w.signal);
        return {};
      });
  return {
    fenceClusterNetwork: fencing(FenceControllerService.fenceClusterNetwork),
    unFenceClusterNetwork: fencing(FenceControllerService.unfenceClusterNetwork),
    getFenceClients: (req, ctx) =>
      relay(deps, ctx, NEEDS.fenceClients, async (w) => {
        const secrets = await namedSecret(deps, ctx, req, "InvalidArgument");
        const res = await deps.driver.call(FenceControllerService.getFenceClients, { parameters: req.parameters, secrets }, w.deadline, w.signal);
        return { clients: res.clients.map((c) => ({ id: c.id, cidrs: c.addresses.map((a) => a.cidr) })) };
      }),
  };
}
