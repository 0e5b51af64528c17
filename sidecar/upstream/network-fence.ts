// proto.NetworkFence → fence.FenceController: parameters and CIDRs as given, the named Secret's
// data as secrets (INVALID_ARGUMENT when it is missing, as upstream; none for GetFenceClients when
// none is named, as upstream).
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
        const secrets = await namedSecret(deps, ctx, req, "InvalidArgument", w.signal);
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
        // Upstream reads a Secret here only when one is named (unlike fencing, where it always reads
        // one): a driver that lists its clients without credentials gets none.
        const named = req.secretName !== "" || req.secretNamespace !== "";
        const secrets = named ? await namedSecret(deps, ctx, req, "InvalidArgument", w.signal) : {};
        const res = await deps.driver.call(FenceControllerService.getFenceClients, { parameters: req.parameters, secrets }, w.deadline, w.signal);
        return { clients: res.clients.map((c) => ({ id: c.id, cidrs: c.addresses.map((a) => a.cidr) })) };
      }),
  };
}
