// server/credentials: the controller port's certificate, in process: the first pair loaded before
// the credentials are handed over, a self-signed pair while the files are missing (unless they are
// required), the files taken once they appear, and a half-written rotation never served.
// auth.test.ts and listen-tls.test.ts show the same through a sidecar process.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EventEmitter } from "node:events";
import { createConnection, type Socket } from "node:net";
import { X509Certificate } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { generate } from "selfsigned";
import { serverCredentials, TlsFilesError, type CertificateSource } from "../../../../sidecar/server/credentials.js";
import { watchRefusedConnections } from "../../../../sidecar/server/refused-connections.js";
import { bindServer } from "../../../../sidecar/server/grpc-server.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { tempDir } from "../../../support/proc.js";
import { waitFor } from "../../../support/wait.js";
import { servedCertificate } from "../../../support/secure-sidecar.js";
import { activeHandles } from "../../../support/handles.js";

const cleanups: (() => void)[] = [];
after(() => {
  for (const c of cleanups) c();
});

const pair = async (cn: string) => {
  const p = await generate([{ name: "commonName", value: cn }], { keyType: "ec", curve: "P-256" });
  return { cert: p.cert, key: p.private };
};

function files(dir = tempDir()) {
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  const write = (p: { cert: string; key: string }) => (writeFileSync(certFile, p.cert), writeFileSync(keyFile, p.key));
  return { certFile, keyFile, write };
}

/** Credentials as the sidecar makes them, every certificate they announce, and a server using them. */
async function serve(o: { certFile?: string; keyFile?: string; requireFiles?: boolean; refreshMs?: number }) {
  const { logger, lines } = captureLogger("debug");
  const told: { source: CertificateSource; notAfter: Date }[] = [];
  const tls = await serverCredentials({
    enableTls: true,
    certFile: o.certFile,
    keyFile: o.keyFile,
    requireFiles: o.requireFiles,
    commonName: "plugin-0.csi",
    logger,
    refreshMs: o.refreshMs ?? 50,
    onCertificate: (source, notAfter) => void told.push({ source, notAfter }),
  });
  // Right when the credentials are handed over, before any connection: the first pair is loaded.
  const toldAtStart = told.length;
  const server = new grpc.Server();
  cleanups.push(() => (server.forceShutdown(), tls.close()));
  const port = await bindServer(server, "127.0.0.1:0", tls.credentials);
  return { port, told, toldAtStart, lines, server };
}

test("from files: loaded before the credentials are handed over, announced with its expiry, served", async () => {
  const f = files();
  const p = await pair("from-files");
  f.write(p);
  const s = await serve(f);
  assert.equal(s.toldAtStart, 1);
  assert.deepEqual(s.told, [{ source: "files", notAfter: new Date(new X509Certificate(p.cert).validTo) }]);
  assert.equal((await servedCertificate(s.port)).subject.CN, "from-files");
  assert.ok(s.lines.some((l) => l["message"] === "serving the TLS certificate from files" && l["certFile"] === f.certFile));
});

test("files missing, not required: a self-signed pair for the pod's name at once, then the files once they appear", async () => {
  const f = files();
  const s = await serve(f);
  assert.equal(s.toldAtStart, 1);
  assert.equal(s.told[0]!.source, "self-signed");
  assert.equal((await servedCertificate(s.port)).subject.CN, "plugin-0.csi");
  const warned = s.lines.find((l) => l["message"] === "TLS certificate files not usable; serving a self-signed certificate until they are");
  assert.equal(warned?.["level"], "warn");
  assert.equal(warned?.["reason"], "ENOENT");

  f.write(await pair("arrived"));
  await waitFor("the files served", async () => (await servedCertificate(s.port)).subject.CN === "arrived");
  assert.deepEqual(
    s.told.map((t) => t.source),
    ["self-signed", "files"],
  );
});

test("files missing, looked at every millisecond: the self-signed pair made and announced once, the warning said once", async () => {
  const s = await serve({ ...files(), refreshMs: 1 });
  // Making the pair takes milliseconds, the timer's looks meanwhile would each have found the
  // files missing, said so and begun a pair of their own: they join the first instead.
  assert.equal(s.lines.filter((l) => l["message"] === "TLS certificate files not usable; serving a self-signed certificate until they are").length, 1);
  assert.deepEqual(
    s.told.map((t) => t.source),
    ["self-signed"],
  );
});

test("files missing and required: no credentials, an error naming both files, no timer left re-reading them", async (t) => {
  const f = files();
  const started = t.mock.method(globalThis, "setInterval");
  const stopped = t.mock.method(globalThis, "clearInterval");
  await assert.rejects(serve({ ...f, requireFiles: true }), (e: unknown) => {
    assert.ok(e instanceof TlsFilesError);
    assert.equal(e.message, `TLS certificate files ${f.certFile}, ${f.keyFile} are not usable (ENOENT) and --require-tls-files is set`);
    return true;
  });
  const timers = started.mock.calls.map((c) => c.result);
  assert.equal(timers.length, 1, "the files' refresh timer");
  assert.ok(
    stopped.mock.calls.some((c) => c.arguments[0] === timers[0]),
    "stopped with the refusal",
  );
});

test("a rotation caught half-way (a new certificate beside the old key) is not served; the whole new pair is", async () => {
  const f = files();
  const first = await pair("first");
  f.write(first);
  const s = await serve(f);
  const second = await pair("second");
  writeFileSync(f.certFile, second.cert);
  await waitFor("the half-written pair seen and kept", () =>
    s.lines.some((l) => l["message"] === "TLS certificate files not usable; keeping the current certificate"),
  );
  assert.equal((await servedCertificate(s.port)).subject.CN, "first");
  assert.equal(s.told.length, 1, "nothing new announced");
  writeFileSync(f.keyFile, second.key);
  await waitFor("the new pair served", async () => (await servedCertificate(s.port)).subject.CN === "second");
  assert.deepEqual(
    s.told.map((t) => t.source),
    ["files", "files"],
  );
});

test("a rotation that stays broken (a new certificate whose key never comes) is said once at warn while the current pair serves on; the next broken one again", async () => {
  const f = files();
  f.write(await pair("first"));
  const s = await serve(f);
  const levels = (from: number) =>
    s.lines
      .filter((l) => l["message"] === "TLS certificate files not usable; keeping the current certificate")
      .slice(from)
      .map((l) => l["level"]);
  /** Waits for the warning and two looks after it; the first look is debug (it may be a rotation half-way), one warning in all. */
  const warnedOnce = async (from: number) => {
    await waitFor(
      "the broken pair warned about, then looked at twice more",
      () => levels(from).indexOf("warn") >= 0 && levels(from).length >= levels(from).indexOf("warn") + 3,
    );
    assert.equal(levels(from)[0], "debug");
    assert.equal(levels(from).filter((l) => l === "warn").length, 1);
  };
  const second = await pair("second");
  writeFileSync(f.certFile, second.cert);
  await warnedOnce(0);
  assert.equal((await servedCertificate(s.port)).subject.CN, "first");

  writeFileSync(f.keyFile, second.key);
  await waitFor("the mended pair served", async () => (await servedCertificate(s.port)).subject.CN === "second");
  const third = await pair("third");
  const before = levels(0).length;
  writeFileSync(f.certFile, third.cert);
  await warnedOnce(before);
});

test("the same pair written again (new times, same bytes: how a look can also catch a file being written) is not announced again", async () => {
  const f = files();
  const p = await pair("first");
  f.write(p);
  const s = await serve({ ...f, refreshMs: 1 });
  f.write(p);
  const rewritten = "TLS certificate files rewritten with the pair being served";
  const announced = () => s.lines.filter((l) => l["message"] === "serving the TLS certificate from files").length;
  // A look that has seen the new time stamps either says so or announced the pair anew.
  await waitFor("a look at the rewritten files", () => s.lines.some((l) => l["message"] === rewritten) || announced() > 1);
  assert.equal(s.told.length, 1);
  assert.equal(announced(), 1);
});

test("TLS off: insecure credentials, nothing loaded", async () => {
  const told: string[] = [];
  const { logger } = captureLogger("debug");
  const tls = await serverCredentials({
    enableTls: false,
    certFile: undefined,
    keyFile: undefined,
    commonName: "x",
    logger,
    onCertificate: (s) => void told.push(s),
  });
  assert.equal(tls.credentials._isSecure(), false);
  assert.deepEqual(told, []);
  tls.close();
});

test("the files' refresh timer looks every 10 s unless told otherwise, and does not keep the process alive", async (t) => {
  const f = files();
  f.write(await pair("timer"));
  const { logger } = captureLogger("debug");
  const ticking = () => activeHandles("Timeout");
  const before = ticking();
  const started = t.mock.method(globalThis, "setInterval");
  const tls = await serverCredentials({ enableTls: true, certFile: f.certFile, keyFile: f.keyFile, commonName: "x", logger });
  try {
    assert.deepEqual(
      started.mock.calls.map((c) => c.arguments[1]),
      [10_000],
    );
    assert.equal(ticking(), before, "unref'd");
  } finally {
    tls.close();
  }
});

test("refused connections: watched on a TLS port (a plaintext client is told as such, a TCP probe not at all), not on a plaintext one", async () => {
  const f = files();
  f.write(await pair("refusing"));
  const s = await serve(f);
  const refused: string[] = [];
  const peers: string[] = [];
  assert.equal(
    watchRefusedConnections(s.server, (reason, peer) => void (refused.push(reason), peers.push(peer))),
    true,
  );
  // A TCP probe (a kubelet's tcpSocket check, a port scan) connects and closes without a byte.
  // The server fails its handshake too; it is seen closed on the server's side before anything else.
  let closedOnServer = 0;
  const http2 = [...(s.server as unknown as { http2Servers: Map<EventEmitter, unknown> }).http2Servers.keys()][0]!;
  http2.on("connection", (raw: Socket) => raw.on("close", () => closedOnServer++));
  const probe = createConnection({ host: "127.0.0.1", port: s.port }, () => probe.end());
  await waitFor("the probe closed on the server's side", () => closedOnServer === 1);
  const plain = new grpc.Server();
  cleanups.push(() => plain.forceShutdown());
  await bindServer(plain, "127.0.0.1:0", grpc.ServerCredentials.createInsecure());
  assert.equal(
    watchRefusedConnections(plain, () => {}),
    false,
  );

  const client = new grpc.Client(`127.0.0.1:${s.port}`, grpc.credentials.createInsecure());
  client.waitForReady(Date.now() + 1_000, () => client.close());
  await waitFor("the plaintext client refused", () => refused.includes("plaintext"));
  // One that writes and hangs up at once: its socket has no address left when the handshake fails.
  const hasty = createConnection({ host: "127.0.0.1", port: s.port }, () => hasty.end("GET / HTTP/1.1\r\nHost: x\r\n\r\n", () => hasty.destroy()));
  hasty.on("error", () => {});
  await waitFor("the second refusal", () => refused.length === 2);
  assert.deepEqual(refused, ["plaintext", "plaintext"], "the probe is not among them");
  for (const peer of peers) assert.match(peer, /^127\.0\.0\.1:\d+$/, "the client's address, taken when it connected");
});
