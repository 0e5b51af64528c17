// Optional HTTPS: a self-signed serving certificate for 127.0.0.1/localhost whose PEM doubles as
// the kubeconfig's certificate-authority-data, so clients verify the server as they would in a
// cluster (no insecure-skip-tls-verify).
import { generate } from "selfsigned";

export async function selfSignedCert(): Promise<{ key: string; cert: string; caData: string }> {
  const pems = await generate([{ name: "commonName", value: "kube-api-harness" }], {
    keyType: "ec",
    algorithm: "sha256",
    extensions: [
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", digitalSignature: true, keyCertSign: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 2, value: "localhost" },
          { type: 7, ip: "127.0.0.1" },
        ],
      },
    ],
  });
  return { key: pems.private, cert: pems.cert, caData: Buffer.from(pems.cert).toString("base64") };
}
