// TLS for the controller port. The operator's certificate is re-read when its files change; until
// the files exist (an optional Secret not created yet) a self-signed pair keeps the port on TLS,
// so the port is never plaintext while auth is on and never dead for want of a Secret.
import { readFile, stat } from "node:fs/promises";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../log/logger.js";

type Identity = { certificate: Buffer; privateKey: Buffer };
type Listener = (update: Identity | null) => void;

export interface TlsOptions {
  enableTls: boolean;
  certFile: string | undefined;
  keyFile: string | undefined;
  commonName: string;
  logger: Logger;
  refreshMs?: number;
}

export interface ServerTls {
  credentials: grpc.ServerCredentials;
  close(): void;
}

export async function serverCredentials(opts: TlsOptions): Promise<ServerTls> {
  if (!opts.enableTls) return { credentials: grpc.ServerCredentials.createInsecure(), close() {} };
  const provider = new ReloadingProvider(opts);
  await provider.refresh();
  // grpc-js takes the identity provider first despite the parameter's declared name.
  return { credentials: grpc.experimental.createCertificateProviderServerCredentials(provider, null, false), close: () => provider.close() };
}

class ReloadingProvider implements grpc.experimental.CertificateProvider {
  private readonly listeners = new Set<Listener>();
  private current: Identity | undefined;
  private selfSigned: Identity | undefined;
  private stamp = "";
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly opts: TlsOptions) {
    this.timer = setInterval(() => void this.refresh(), opts.refreshMs ?? 10_000);
    this.timer.unref();
  }

  async refresh(): Promise<void> {
    const { certFile, keyFile, logger } = this.opts;
    let next: Identity | undefined;
    let stamp = "self-signed";
    if (certFile && keyFile) {
      try {
        const [c, k] = await Promise.all([stat(certFile), stat(keyFile)]);
        stamp = `${c.mtimeMs}:${c.size}:${k.mtimeMs}:${k.size}`;
        if (stamp === this.stamp) return;
        next = { certificate: await readFile(certFile), privateKey: await readFile(keyFile) };
        logger.info("serving the TLS certificate from files", { certFile });
      } catch (err) {
        stamp = "self-signed";
        if (stamp !== this.stamp) {
          logger.warn("TLS certificate files not readable; serving a self-signed certificate until they are", {
            certFile,
            reason: (err as NodeJS.ErrnoException).code ?? String(err),
          });
        }
      }
    }
    if (stamp === this.stamp) return;
    if (!next) {
      this.selfSigned ??= await makeSelfSigned(this.opts.commonName);
      next = this.selfSigned;
    }
    this.stamp = stamp;
    this.current = next;
    for (const l of this.listeners) l(next);
  }

  close(): void {
    clearInterval(this.timer);
  }

  addIdentityCertificateListener(listener: Listener): void {
    this.listeners.add(listener);
    // Asynchronously: grpc-js registers its own watcher only after this call returns.
    const current = this.current;
    if (current) queueMicrotask(() => this.listeners.has(listener) && listener(current));
  }
  removeIdentityCertificateListener(listener: Listener): void {
    this.listeners.delete(listener);
  }
  addCaCertificateListener(): void {}
  removeCaCertificateListener(): void {}
}

async function makeSelfSigned(commonName: string): Promise<Identity> {
  // Loaded only when needed: the X.509 library costs ~15 MB of memory a sidecar with real certificates never uses.
  const { generate } = await import("selfsigned");
  const pems = await generate([{ name: "commonName", value: commonName }], { keyType: "ec", curve: "P-256" });
  return { certificate: Buffer.from(pems.cert), privateKey: Buffer.from(pems.private) };
}
