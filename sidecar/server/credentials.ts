// TLS for the controller port. The operator's certificate is re-read when its files change; until
// the files exist (an optional Secret not created yet) a self-signed pair keeps the port on TLS,
// so the port is never plaintext while auth is on and never dead for want of a Secret — unless
// the files are required (--require-tls-files): then start-up fails naming them, because a pod
// that is Ready on a certificate no caller can verify hides a missing or misnamed Secret.
import { X509Certificate } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { createSecureContext } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import type { TlsPolicy } from "../config/upstream.js";
import type { Logger } from "../../common/log/logger.js";
import { commonJs } from "../util/common-js.js";
import { applyTlsPolicy } from "./tls-policy.js";

type Identity = { certificate: Buffer; privateKey: Buffer };
type Listener = (update: Identity | null) => void;
export type CertificateSource = "files" | "self-signed";

const SELF_SIGNED = "self-signed";

export interface TlsOptions {
  enableTls: boolean;
  certFile: string | undefined;
  keyFile: string | undefined;
  /** Fail start-up when the files are not usable, never fall back to a self-signed pair. */
  requireFiles?: boolean;
  commonName: string;
  logger: Logger;
  refreshMs?: number;
  /** Versions, ciphers and curves; default Node's. */
  policy?: TlsPolicy;
  /** Told about every certificate served from now on (for metrics). */
  onCertificate?: (source: CertificateSource, notAfter: Date) => void;
}

export class TlsFilesError extends Error {}

export interface ServerTls {
  credentials: grpc.ServerCredentials;
  close(): void;
}

export async function serverCredentials(opts: TlsOptions): Promise<ServerTls> {
  if (!opts.enableTls) return { credentials: grpc.ServerCredentials.createInsecure(), close() {} };
  const provider = new ReloadingProvider(opts);
  await provider.refresh().catch((err: unknown) => {
    provider.close();
    throw err;
  });
  // grpc-js takes the identity provider first despite the parameter's declared name.
  const credentials = grpc.experimental.createCertificateProviderServerCredentials(provider, null, false);
  return { credentials: opts.policy ? applyTlsPolicy(credentials, opts.policy) : credentials, close: () => provider.close() };
}

class ReloadingProvider implements grpc.experimental.CertificateProvider {
  private readonly listeners = new Set<Listener>();
  private current: Identity | undefined;
  private selfSigned: Identity | undefined;
  private stamp = "";
  /** The unusable files last seen while serving a pair from files, and whether that was said at warn. */
  private unusable: { files: string; warned: boolean } | undefined;
  private refreshing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: TlsOptions) {
    if (opts.certFile && opts.keyFile) {
      // After start a refresh cannot fail: unusable files keep the current pair.
      this.timer = setInterval(() => void this.refresh().catch(() => {}), opts.refreshMs ?? 10_000);
      this.timer.unref();
    }
  }

  /**
   * Reads the files and tells what changed. A look the timer starts while one is still running
   * (the first, making a self-signed pair, can take longer than the period) joins it: two at once
   * would both find the files missing and make and announce a self-signed pair each.
   */
  refresh(): Promise<void> {
    this.refreshing ??= this.look().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async look(): Promise<void> {
    const read = await this.readFiles();
    if (read.stamp === this.stamp) return;
    const same =
      read.identity && this.current && read.identity.certificate.equals(this.current.certificate) && read.identity.privateKey.equals(this.current.privateKey);
    if (same) {
      // The stamp of a file caught while it was being written, then of the finished file: one pair.
      this.stamp = read.stamp;
      this.opts.logger.debug("TLS certificate files rewritten with the pair being served", { certFile: this.opts.certFile });
      return;
    }
    if (read.identity) {
      this.opts.logger.info("serving the TLS certificate from files", { certFile: this.opts.certFile });
    } else if (read.error && this.opts.requireFiles) {
      throw new TlsFilesError(
        `TLS certificate files ${this.opts.certFile}, ${this.opts.keyFile} are not usable (${read.error}) and --require-tls-files is set`,
      );
    } else if (read.error) {
      this.opts.logger.warn("TLS certificate files not usable; serving a self-signed certificate until they are", {
        certFile: this.opts.certFile,
        reason: read.error,
      });
    }
    const next = read.identity ?? (this.selfSigned ??= await makeSelfSigned(this.opts.commonName));
    this.stamp = read.stamp;
    this.current = next;
    this.opts.onCertificate?.(read.identity ? "files" : "self-signed", new Date(new X509Certificate(next.certificate).validTo));
    for (const l of this.listeners) l(next);
  }

  /** The files' pair when they changed since the last refresh, a stamp saying which pair it is. */
  private async readFiles(): Promise<{ stamp: string; identity?: Identity; error?: string }> {
    const { certFile, keyFile } = this.opts;
    if (!certFile || !keyFile) return { stamp: SELF_SIGNED };
    let stamp: string | undefined;
    try {
      const [c, k] = await Promise.all([stat(certFile), stat(keyFile)]);
      stamp = `${c.mtimeMs}:${c.size}:${k.mtimeMs}:${k.size}`;
      if (stamp === this.stamp) return { stamp };
      const identity = { certificate: await readFile(certFile), privateKey: await readFile(keyFile) };
      // A rotation caught between writing the two files gives a pair that does not match; grpc-js
      // would then refuse every connection. Keep serving the old pair and look again next tick.
      createSecureContext({ cert: identity.certificate, key: identity.privateKey });
      return { stamp, identity };
    } catch (err) {
      const error = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      if (this.current && this.stamp !== SELF_SIGNED) {
        // Half-way through a rotation the files look like this for a moment (debug); the same
        // files still unusable at the next look are a rotation gone wrong, said once at warn,
        // before the certificate being served runs out.
        const files = `${stamp ?? "unreadable"}:${error}`;
        const again = this.unusable?.files === files;
        const warn = again && !this.unusable!.warned;
        this.unusable = { files, warned: again };
        this.opts.logger.log(warn ? "warn" : "debug", "TLS certificate files not usable; keeping the current certificate", { certFile, reason: error });
        return { stamp: this.stamp };
      }
      return { stamp: SELF_SIGNED, error };
    }
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
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
  const { generate } = commonJs(await import("selfsigned"));
  const pems = await generate([{ name: "commonName", value: commonName }], { keyType: "ec", curve: "P-256" });
  return { certificate: Buffer.from(pems.cert), privateKey: Buffer.from(pems.private) };
}
