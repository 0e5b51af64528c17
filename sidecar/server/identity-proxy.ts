// identity.Identity served as a transparent pass-through: raw request and response bytes, so
// capabilities newer than our proto reach the controller untouched.
import type * as grpc from "@grpc/grpc-js";
import { unavailable } from "../errors.js";
import type { DriverConnection } from "../driver/connection.js";
import { rawMethod } from "../driver/unary.js";
import type { Next } from "./context.js";

const SERVICE = "identity.Identity";
const METHODS = ["GetIdentity", "GetCapabilities", "Probe"] as const;

const raw = (b: Buffer) => b;

export function identityProxyDefinition(): grpc.ServiceDefinition {
  return Object.fromEntries(
    METHODS.map((m) => [
      m,
      {
        path: `/${SERVICE}/${m}`,
        requestStream: false,
        responseStream: false,
        requestSerialize: raw,
        requestDeserialize: raw,
        responseSerialize: raw,
        responseDeserialize: raw,
      },
    ]),
  );
}

export function identityProxyHandlers(driver: DriverConnection): Record<string, Next<Buffer, Buffer>> {
  return Object.fromEntries(
    METHODS.map((m) => [
      m,
      async (req: Buffer, ctx) => {
        if (!driver.ready) throw unavailable("driver is not connected or not ready");
        return driver.call(rawMethod(`/${SERVICE}/${m}`), req, ctx.deadline, ctx.signal);
      },
    ]),
  );
}
