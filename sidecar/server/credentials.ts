// TLS for the controller port: the operator's certificate (re-read when the files change), or a
// self-signed pair made at start so the port is never plaintext while auth is on.
import * as grpc from "@grpc/grpc-js";
import { generate } from "selfsigned";

export async function serverCredentials(opts: {
  enableTls: boolean;
  certFile: string | undefined;
  keyFile: string | undefined;
  commonName: string;
}): Promise<grpc.ServerCredentials> {
  if (!opts.enableTls) return grpc.ServerCredentials.createInsecure();
  if (opts.certFile && opts.keyFile) {
    const provider = new grpc.experimental.FileWatcherCertificateProvider({
      certificateFile: opts.certFile,
      privateKeyFile: opts.keyFile,
      refreshIntervalMs: 60_000,
    });
    // grpc-js takes the identity provider first despite the parameter's declared name.
    return grpc.experimental.createCertificateProviderServerCredentials(provider, null, false);
  }
  const pems = await generate([{ name: "commonName", value: opts.commonName }], { keyType: "ec", curve: "P-256" });
  return grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(pems.private), cert_chain: Buffer.from(pems.cert) }], false);
}
