// Whether and in which Lease this sidecar takes part, decided on every driver handshake: a driver
// that advertises CONTROLLER_SERVICE is a controller plugin (upstream: HasControllerService), and
// its sidecars elect one holder of "<driver>-csi-addons"; a node plugin's sidecars take no part.
// Changes are applied one after the other, so a quick driver restart never runs two electors.
// Unlike the upstream sidecar, losing the Lease does not end the process: the sidecar goes on
// serving its node and becomes a candidate again.
import type { LeaderElectionConfig } from "../config/config.js";
import type { DriverInfo } from "../driver/connection.js";
import type { KubeApi } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { LeaseElector } from "../../common/election/lease-elector.js";
import { leaseName } from "./lease-name.js";
import { leaseStore } from "./lease-store.js";

export class ControllerLease {
  private elector: LeaseElector | undefined;
  private leaseOf: string | undefined;
  private closed = false;
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly opts: { kube: KubeApi; logger: Logger; identity: string; config: LeaderElectionConfig }) {}

  /** Follows the driver as the last handshake describes it. */
  follow(driver: DriverInfo): Promise<void> {
    return this.then(async () => {
      const name = driver.controllerService ? leaseName(driver.name) : "";
      if (this.closed || name === this.leaseOf) return;
      await this.elector?.stop();
      this.elector = undefined;
      this.leaseOf = name;
      if (!name) {
        this.opts.logger.info("the driver has no CONTROLLER_SERVICE capability: not taking part in leader election", { driver: driver.name });
        return;
      }
      const { config, kube, logger, identity } = this.opts;
      const lease = `${config.namespace}/${name}`;
      logger.info("taking part in the controller plugin's leader election", { lease, identity });
      this.elector = new LeaseElector({ ...config, store: leaseStore(kube, config.namespace, name), logger, lease, identity });
      this.elector.on("leading", (on) => on && logger.info("became the leader: receiving CONTROLLER_SERVICE requests", { lease }));
      this.elector.start();
    });
  }

  /** For good: releases a held Lease and ignores later handshakes. */
  stop(): Promise<void> {
    this.closed = true;
    return this.then(async () => {
      await this.elector?.stop();
      this.elector = undefined;
    });
  }

  private then(step: () => Promise<void>): Promise<void> {
    this.chain = this.chain.then(step, step);
    return this.chain;
  }
}
