// The sidecar with auth on, as the healer controller sees it: a certificate for the controller
// port, the flags that turn TLS and caller authentication on, TLS gRPC clients, a health check
// that needs no token.
import { writeFileSync } from "node:fs";
import { connect as tlsConnect, type PeerCertificate } from "node:tls";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { generate } from "selfsigned";
import type { KubeApi } from "../kube/index.js";
import { NAMESPACE } from "./fixtures.js";
import type { HealthCheck } from "./grpc.js";

/** The audience the sidecar's callers' tokens must carry (--auth-audience). */
export const AUDIENCE = "csi-addons-healer";
/** The healer controller's identity. */
export const HEALER_USER = `system:serviceaccount:${NAMESPACE}:healer-controller`;

/** The healer controller's permission (heal only), which the sidecar's SubjectAccessReview asks about (not the sidecar's own). */
export function allowHealer(kube: KubeApi): void {
  kube.auth.allow(HEALER_USER, { verbs: ["call"], apiGroups: ["csiaddons.openshift.io"], resources: ["csiaddonsnodes/heal"], namespace: NAMESPACE });
}

export interface TlsFiles {
  caPem: string;
  certFile: string;
  keyFile: string;
}

/** A self-signed certificate for "localhost", written into `dir`. */
export async function makeTlsFiles(dir: string): Promise<TlsFiles> {
  const pems = await generate([{ name: "commonName", value: "localhost" }], { keyType: "ec", curve: "P-256" });
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  writeFileSync(certFile, pems.cert);
  writeFileSync(keyFile, pems.private);
  return { caPem: pems.cert, certFile, keyFile };
}

/** The certificate a TLS client is shown on 127.0.0.1:port right now (not verified). */
export function servedCertificate(port: number): Promise<PeerCertificate> {
  return new Promise((resolve, reject) => {
    const sock = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false, ALPNProtocols: ["h2"], servername: "localhost" }, () => {
      const cert = sock.getPeerCertificate();
      sock.destroy();
      resolve(cert);
    });
    sock.once("error", reject);
  });
}

/** Sidecar flags: auth on, our audience, the certificate from files. */
export function authArgs(audience: string, tls: TlsFiles): string[] {
  return ["--enable-auth=true", `--auth-audience=${audience}`, `--tls-cert-file=${tls.certFile}`, `--tls-key-file=${tls.keyFile}`];
}

/** Channel options for a TLS client of a sidecar listening on 127.0.0.1 with a "localhost" certificate. */
export const TLS_CLIENT_OPTIONS: grpc.ChannelOptions = { "grpc.ssl_target_name_override": "localhost", "grpc.default_authority": "localhost" };

export function tlsCredentials(tls: TlsFiles): grpc.ChannelCredentials {
  return grpc.credentials.createSsl(Buffer.from(tls.caPem));
}

const HealthClient = grpc.makeClientConstructor(healthService as grpc.ServiceDefinition, "grpc.health.v1.Health");

/** grpc.health.v1 Check without a token; "" when the call fails. */
export function checkHealth(address: string, creds: grpc.ChannelCredentials, options: grpc.ChannelOptions = {}, service = ""): Promise<string> {
  const c = new HealthClient(address, creds, options);
  return new Promise<string>((resolve) =>
    (c as unknown as { check: HealthCheck }).check({ service }, { deadline: Date.now() + 3000 }, (err: Error | null, res: { status: string }) => {
      c.close();
      resolve(err ? "" : res.status);
    }),
  );
}
