// `npm run demo [-- --hold] [-- --keep]`: the whole healing loop on one machine. The in-memory
// Kubernetes API runs in this process; the driver-stub, the sidecar and the healer controller run
// as real processes on real sockets. The controller does the healing on its own; this program
// breaks things, watches (as an operator with grpcurl and kubectl would) and tells what happens.
// Exit 0 only when every step behaved; otherwise 1 and the step that did not. Everything started
// is stopped on the way out, also on failure and on Ctrl-C.
import { rmSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { startKubeApi, type KubeApi } from "../kube/index.js";
import { restartDriverStub, startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE, NODE, POD, ourCrdFile } from "../support/fixtures.js";
import { call, codeName } from "../support/grpc.js";
import { tempDir } from "../support/proc.js";
import { waitFor } from "../support/wait.js";
import { IdentityClient } from "../../proto/gen/identity/identity.js";
import { VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { VolumeHealth_State as State, volumeHealth_StateToJSON as stateName } from "../../proto/gen/healer/v1/healer.js";
import { DEAD_MOUNT, DRIVER, STAGE_SECRET, VOLUMES, healthyState, seedObjects } from "./cluster.js";
import { TLS_CLIENT_OPTIONS, makeTlsFiles, tlsCredentials, type TlsFiles } from "../support/secure-sidecar.js";
import { nodeAudience } from "../../common/auth/audience.js";
import { CONTROLLER_SA, CONTROLLER_USER, HANDLED_RESTART, HEALS_METRIC, RESTART_METRIC, spawnController } from "./controller-process.js";
import { decisions, eventsAbout, lastByPv, metricSum, samples, type Decision } from "./controller-view.js";
import type { LoggedProcess } from "./logged-process.js";
import { Cleanup, spawnSidecar, type SidecarProcess } from "./processes.js";
import { parseArgs } from "./args.js";
import { capabilityName, healthText, listIfServed } from "./narration.js";
import { Story } from "./story.js";
import { formatTable } from "./table.js";

const CAN = "csiaddons.openshift.io/v1alpha1";
/** The demo's own calls, as an operator with grpcurl would make them: a token of this node's audience. */
const OPERATOR = { user: "demo-operator", token: "demo-operator-token" };
/** What our healer controller (and the operator here) may call: the heal family only. */
const HEAL_FAMILY = { verbs: ["call"], apiGroups: ["csiaddons.openshift.io"], resources: ["csiaddonsnodes/heal"], namespace: NAMESPACE };
const RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
/** Short, so that the periodic IF_ABNORMAL pass comes round within the demo (default 5m). */
const CHECK_INTERVAL = "2s";
const STEPS = 10;

const say = (line: string) => process.stdout.write(`${line}\n`);
/** One row of the summary per volume: what happened to it at each stage. */
type Row = Record<"start" | "firstPass" | "fault" | "pass" | "restart" | "healAll" | "final", string>;

const cleanup = new Cleanup();

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  let passed = false;
  // Ctrl-C while holding after a good run is the normal way out: exit 0 then.
  cleanup.onSignal(say, () => (opts.hold && passed ? 0 : 130));
  const dir = tempDir("csi-healer-demo-", { keep: true });
  cleanup.add("temporary directory", () => {
    if (!passed || opts.keep) return say(`kept ${dir} (sidecar and controller logs, driver state file and call log)`);
    rmSync(dir, { recursive: true, force: true });
    say(`removed ${dir} (--keep keeps it)`);
  });
  const story: Story = new Story(STEPS, say, () => cleanup.interrupted);
  const rows = new Map<string, Row>(VOLUMES.map((v) => [v.pv, { start: "", firstPass: "", fault: "-", pass: "", restart: "", healAll: "", final: "" }]));

  let kube: KubeApi;
  let stub: DriverStub;
  let sidecar: SidecarProcess;
  let controller: LoggedProcess;
  let healer: VolumeHealerClient;
  let identity: IdentityClient;
  let tls: TlsFiles;

  const csiAddonsNode = () =>
    kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as
      { metadata: { annotations?: Record<string, string> }; spec: { driver: Record<string, string> } } | undefined;
  const annotation = (key: string) => csiAddonsNode()?.metadata.annotations?.[key];
  const health = (pvName: string) => call(healer, healer.getVolumeHealth, { pvName });
  const driverHeals = (since = 0) => stub.calls({ server: "addons", method: "NodeHealVolume" }).filter((c) => c.t0 >= since);
  const getIdentity = async () => {
    const r = await call(identity, identity.getIdentity, {});
    story.expect(r.ok, `GetIdentity through the sidecar failed: ${r.ok ? "" : `${codeName(r.code)} ${r.details}`}`);
    return r.value;
  };
  /**
   * Waits until the controller has logged a decision of `trigger` for every volume since `since`
   * (and `until` holds for those decisions); returns the last one per PV.
   */
  const passOver = async (trigger: string, since: number, what: string, until: (ds: Decision[]) => boolean = () => true) =>
    controller.waitWhileRunning(what, () => {
      const ds = decisions(controller.logLines(), since).filter((d) => d.trigger === trigger);
      const last = lastByPv(ds);
      return VOLUMES.every((v) => last.has(v.pv)) && until(ds) && last;
    });
  const nowHealthy = async (pvName: string) => {
    const r = await health(pvName);
    return r.ok ? healthText(r.value.health) : codeName(r.code);
  };
  const events = () => [...kube.list("v1", "Event"), ...listIfServed(kube, "events.k8s.io/v1", "Event")];

  say("csi-addons-healer demo: a node plugin restarts, its user-space mounts die, and the healer controller brings them back on its own.");
  say(`working directory (driver sockets and state, sidecar and controller logs): ${dir}`);

  const outcome = await cleanup.watch(
    story.run(async () => {
      story.step("Kubernetes: the in-memory API server, seeded like a small cluster");
      kube = await startKubeApi({ tls: true, crdFiles: [ourCrdFile], seed: seedObjects() });
      cleanup.add("in-memory Kubernetes API", () => kube.stop());
      story.line(`API server ${kube.url} (in this process; HTTPS with a throw-away certificate)`);
      story.line(`kubeconfig: ${kube.kubeconfigPath}`);
      story.line(`  watch along: kubectl --kubeconfig ${kube.kubeconfigPath} get csiaddonsnodes -n ${NAMESPACE} -o yaml`);
      story.line(
        `node ${NODE}, node-plugin pod ${NAMESPACE}/${POD} (DaemonSet csi-plugin, pod IP 127.0.0.1), stage secret ${STAGE_SECRET.namespace}/${STAGE_SECRET.name}`,
      );
      for (const v of VOLUMES) story.line(`PersistentVolume ${v.pv.padEnd(12)} volume ${v.handle.padEnd(13)} ${v.kind}, attached to ${NODE}`);
      story.expect(kube.list("v1", "PersistentVolume").length === VOLUMES.length, "the PVs are in the API");

      story.step("Driver: the driver-stub, a real CSI-Addons driver process");
      stub = await startDriverStub({ dir, state: healthyState() });
      cleanup.add("driver-stub", () => stub.stop());
      story.line(`driver ${stub.name}, pid ${stub.proc.child.pid}`);
      story.line(`CSI-Addons socket ${stub.addonsSocket} (the sidecar talks here)`);
      story.line(`CSI socket        ${stub.csiSocket} (the kubelet's; the sidecar never dials it)`);
      story.line(`state file ${stub.stateFile}: ${VOLUMES.length} volumes staged, all HEALTHY`);

      story.step("Sidecar: starts next to the driver and registers the node");
      tls = await makeTlsFiles(dir);
      sidecar = await spawnSidecar({
        build: "source",
        driverSocket: stub.addonsSocket,
        kubeconfig: kube.kubeconfigPath,
        logFile: join(dir, "sidecar.log"),
        args: ["--enable-auth=true", `--tls-cert-file=${tls.certFile}`, `--tls-key-file=${tls.keyFile}`],
      });
      cleanup.add("sidecar", () => sidecar.stop());
      story.line(`sidecar pid ${sidecar.pid}, controller port ${sidecar.address}, /healthz /readyz /metrics on 127.0.0.1:${sidecar.httpPort}`);
      story.line(
        `caller auth is ON, as in a cluster: TLS (${tls.certFile}), a token for this node only (audience ${nodeAudience(NODE)}), and call csiaddonsnodes/heal (per-service RBAC).`,
      );
      story.line(`sidecar log (JSON lines): ${sidecar.logFile}`);
      await sidecar.waitReadyz(200);
      const ready = await sidecar.readyz();
      story.line(`/readyz 200 after ${((Date.now() - sidecar.spawnedAt) / 1000).toFixed(1)} s: ${ready.body}`);
      const node = csiAddonsNode();
      story.expect(node, `CSIAddonsNode ${NAMESPACE}/${CSI_ADDONS_NODE_NAME} exists`);
      story.expect(node.spec.driver["name"] === DRIVER, `CSIAddonsNode names driver ${DRIVER}`);
      story.line(`CSIAddonsNode ${NAMESPACE}/${CSI_ADDONS_NODE_NAME}: driver ${node.spec.driver["name"]}, endpoint ${node.spec.driver["endpoint"]}`);
      story.expect(node.metadata.annotations?.[RESTARTED_AT] === undefined, "no driver restart recorded yet");
      story.line(`no ${RESTARTED_AT} annotation yet: the driver has not restarted`);

      story.step("Look: who is this driver, and can it heal? (identity pass-through, as grpcurl would ask)");
      kube.auth.addToken(OPERATOR.token, { username: OPERATOR.user, audiences: [nodeAudience(NODE)] });
      kube.auth.allow(OPERATOR.user, HEAL_FAMILY);
      const asOperator = grpc.credentials.combineChannelCredentials(
        tlsCredentials(tls),
        grpc.credentials.createFromMetadataGenerator((_params, cb) => {
          const md = new grpc.Metadata();
          md.set("authorization", `Bearer ${OPERATOR.token}`);
          cb(null, md);
        }),
      );
      healer = new VolumeHealerClient(sidecar.address, asOperator, TLS_CLIENT_OPTIONS);
      identity = new IdentityClient(sidecar.address, asOperator, TLS_CLIENT_OPTIONS);
      cleanup.add("gRPC clients", () => (healer.close(), identity.close()));
      const id = await getIdentity();
      story.expect(id.name === DRIVER, `GetIdentity names ${DRIVER}, got ${JSON.stringify(id.name)}`);
      const bootId = id.manifest["bootId"];
      story.line(`GetIdentity: ${id.name} ${id.vendorVersion}, boot id ${bootId}`);
      const caps = await call(identity, identity.getCapabilities, {});
      story.expect(caps.ok, "GetCapabilities through the sidecar answers");
      const names = caps.value.capabilities.map(capabilityName);
      story.line(`GetCapabilities (the driver's bytes, relayed untouched): ${names.join(", ")}`);
      story.expect(
        names.includes("VolumeHealer GET_VOLUME_HEALTH") && names.includes("VolumeHealer HEAL_VOLUME"),
        "the driver offers GET_VOLUME_HEALTH and HEAL_VOLUME",
      );

      story.step("Look: health of every volume on the node");
      for (const v of VOLUMES) {
        const r = await health(v.pv);
        story.expect(r.ok, `GetVolumeHealth ${v.pv} answers (${r.ok ? "" : `${codeName(r.code)}: ${r.details}`})`);
        story.line(`${v.pv.padEnd(12)} -> volume ${r.value.volumeId.padEnd(13)} ${healthText(r.value.health)}`);
        story.expect(r.value.health?.state === State.HEALTHY, `${v.pv} starts HEALTHY`);
        rows.get(v.pv)!.start = stateName(r.value.health!.state);
      }

      story.step("Controller: the healer controller starts, finds the node and checks its volumes");
      kube.auth.addToken("demo-controller-token", { username: CONTROLLER_USER });
      kube.auth.allow(CONTROLLER_USER, HEAL_FAMILY);
      controller = await spawnController({
        build: "source",
        kubeconfig: kube.writeKubeconfig("demo-controller-token", "healer-controller"),
        logFile: join(dir, "controller.log"),
        args: [
          `--check-interval=${CHECK_INTERVAL}`,
          "--sidecar-tls=true",
          `--sidecar-ca-file=${tls.certFile}`,
          "--sidecar-tls-server-name=localhost",
          `--service-account=${CONTROLLER_SA.namespace}/${CONTROLLER_SA.name}`,
        ],
      });
      cleanup.add("healer controller", () => controller.stop());
      story.line(`csi-addons-healer-controller pid ${controller.pid}, /healthz /readyz /metrics on 127.0.0.1:${String(controller.started["httpPort"])}`);
      story.line(
        `  TLS verified against the sidecar's certificate, a token per node (--service-account ${CONTROLLER_SA.namespace}/${CONTROLLER_SA.name}), --leader-elect=false (one replica), --check-interval=${CHECK_INTERVAL} (default 5m)`,
      );
      story.line(`controller log (JSON lines): ${controller.logFile}`);
      const firstMarker = await controller.waitWhileRunning(`the controller's ${HANDLED_RESTART} annotation`, () => annotation(HANDLED_RESTART));
      const first = await passOver("first-sight", 0, "the controller's first pass over the node");
      story.line(`first sight of ${CSI_ADDONS_NODE_NAME}, no handled marker: its history is unknown, so IF_ABNORMAL, not ALWAYS`);
      for (const v of VOLUMES) {
        const d = first.get(v.pv)!;
        story.expect(d.mode === "IF_ABNORMAL" && d.result === "NOT_NEEDED", `first pass: ${v.pv} IF_ABNORMAL NOT_NEEDED, got ${d.mode} ${d.result}`);
        story.line(`controller: HealVolume ${v.pv.padEnd(12)} ${d.mode} -> ${d.result}`);
        rows.get(v.pv)!.firstPass = d.result;
      }
      story.expect(driverHeals().length === 0, "nothing was healed: every volume is HEALTHY");
      story.line(`CSIAddonsNode annotation ${HANDLED_RESTART}: ${JSON.stringify(firstMarker)} (this node's history is now known)`);

      story.step(`Fault: the user-space mount of pv-shared dies; the periodic IF_ABNORMAL pass (every ${CHECK_INTERVAL}) heals it`);
      const broken = VOLUMES[1]!;
      const faultAt = Date.now();
      stub.updateState((s) => void (s.volumes![broken.handle] = { ...DEAD_MOUNT }));
      story.line(`(driver state file: ${broken.handle} ABNORMAL, ${DEAD_MOUNT.reason})`);
      const sick = await health(broken.pv);
      rows.get(broken.pv)!.fault = "ABNORMAL";
      if (sick.ok && sick.value.health?.state === State.ABNORMAL) {
        story.line(`GetVolumeHealth ${broken.pv}: ${healthText(sick.value.health)}: ${sick.value.health.message}`);
      } else {
        // The periodic pass may come round between the fault and our look.
        story.expect(driverHeals(faultAt).length > 0, `GetVolumeHealth ${broken.pv} reports ABNORMAL, or the controller healed it already`);
        story.line(`GetVolumeHealth ${broken.pv}: already healed again (the periodic pass was quicker than us)`);
      }
      const healedIt = (ds: Decision[]) => ds.some((d) => d.pv === broken.pv && d.result === "HEALED");
      const pass = await passOver("periodic", faultAt, `a periodic pass that heals ${broken.pv}`, healedIt);
      for (const v of VOLUMES) {
        // A pass after the healing one finds pv-shared HEALTHY again: the row shows the pass that healed it.
        const d = v === broken ? { ...pass.get(v.pv)!, mode: "IF_ABNORMAL", result: "HEALED" } : pass.get(v.pv)!;
        const want = v === broken ? "HEALED" : "NOT_NEEDED";
        story.expect(d.mode === "IF_ABNORMAL" && d.result === want, `periodic pass: ${v.pv} IF_ABNORMAL ${want}, got ${d.mode} ${d.result}`);
        story.line(`controller: HealVolume ${v.pv.padEnd(12)} ${d.mode} -> ${d.result.padEnd(10)} now ${await nowHealthy(v.pv)}`);
        rows.get(v.pv)!.pass = d.result;
      }
      const passHeals = driverHeals(faultAt);
      story.expect(passHeals.length === 1, `exactly one NodeHealVolume reached the driver, got ${passHeals.length}`);
      const req = passHeals[0]!.request as {
        stagingTargetPath: string;
        volumeCapability: { mount?: { fsType: string; mountFlags?: string[] }; accessMode: { mode: string } };
      };
      story.line(`the driver got one NodeHealVolume: staging path ${req.stagingTargetPath}`);
      story.line(
        `  capability mount ${req.volumeCapability.mount?.fsType} ${JSON.stringify(req.volumeCapability.mount?.mountFlags ?? [])}, ${req.volumeCapability.accessMode.mode} (all read from the PV by the sidecar, not from the caller)`,
      );
      const healedEvent = await waitFor("a VolumeHealed Event on pv-shared", () =>
        eventsAbout(events(), "PersistentVolume", broken.pv).find((e) => e.reason === "VolumeHealed"),
      );
      story.line(`Event on PersistentVolume ${broken.pv}: ${healedEvent.reason}: ${healedEvent.text}`);

      story.step("Crash: the driver container dies (SIGKILL) and comes back");
      const oldPid = stub.proc.child.pid;
      const killedAt = new Date();
      await stub.kill();
      story.line(`killed driver-stub pid ${oldPid}; every user-space mount it served dies with it`);
      await sidecar.waitReadyz(503);
      story.line(`sidecar /readyz 503: ${(await sidecar.readyz()).body}`);
      const during = await health(VOLUMES[0]!.pv);
      story.expect(
        !during.ok && during.code === grpc.status.UNAVAILABLE,
        `calls fail fast with UNAVAILABLE while the driver is away, got ${during.ok ? "OK" : codeName(during.code)}`,
      );
      story.line(`GetVolumeHealth ${VOLUMES[0]!.pv} meanwhile: ${codeName(during.code)} (fails fast, nothing hangs)`);
      // The new driver process starts with every mount dead (restartDriverStub writes the state first).
      stub = await restartDriverStub(stub, { state: { volumes: Object.fromEntries(VOLUMES.map((v) => [v.handle, { ...DEAD_MOUNT }])) } });
      cleanup.add("restarted driver-stub", () => stub.stop());
      const backAt = stub.readyAt;
      for (const v of VOLUMES) rows.get(v.pv)!.restart = "ABNORMAL";
      story.line(`driver restarted: pid ${stub.proc.child.pid}; its state file says all ${VOLUMES.length} mounts are dead`);
      await sidecar.waitReadyz(200);
      story.line(`sidecar reconnected by itself: /readyz 200`);
      const stamp = await waitFor("the CSIAddonsNode's driverRestartedAt annotation", () => annotation(RESTARTED_AT));
      story.expect(Date.parse(stamp) >= Math.floor(killedAt.getTime() / 1000) * 1000, `driverRestartedAt ${stamp} is not before the crash`);
      story.line(`CSIAddonsNode annotation ${RESTARTED_AT}: (none) -> ${stamp}`);
      const id2 = await getIdentity();
      story.expect(id2.manifest["bootId"] !== bootId, "the restarted driver has a new boot id");
      story.line(`GetIdentity: boot id ${bootId} -> ${id2.manifest["bootId"]}`);

      story.step("Controller: saw driverRestartedAt change and heals every volume of the node with ALWAYS, on its own");
      const marker = await controller.waitWhileRunning("the controller to record the restart as handled", () => {
        const m = annotation(HANDLED_RESTART);
        return m !== undefined && m !== firstMarker && m;
      });
      const restartPass = await passOver("restart", backAt, "the controller's restart heal of every volume");
      const sinceBack = decisions(controller.logLines(), backAt);
      for (const v of VOLUMES) {
        const d = restartPass.get(v.pv)!;
        const healed = sinceBack.filter((x) => x.pv === v.pv && x.result === "HEALED");
        story.expect(healed.length === 1, `${v.pv} was healed exactly once after the restart, got ${healed.length}`);
        // A periodic pass retrying since the crash may reach the volume first; the restart heal then finds it healthy.
        const byPeriodic = healed[0]!.trigger === "periodic";
        story.expect(
          d.mode === "ALWAYS" && (d.result === "HEALED" || (d.result === "NOT_NEEDED" && byPeriodic)),
          `restart heal: ${v.pv} ALWAYS HEALED, got ${d.mode} ${d.result}`,
        );
        story.line(
          `controller: HealVolume ${v.pv.padEnd(12)} ${d.mode} -> ${d.result.padEnd(10)} now ${await nowHealthy(v.pv)}${byPeriodic ? " (a periodic pass, retrying since the crash, healed it just before)" : ""}`,
        );
        rows.get(v.pv)!.healAll = byPeriodic ? "HEALED (periodic)" : d.result;
      }
      const restartHeals = driverHeals(backAt);
      story.expect(
        restartHeals.every((c) => c.code === "OK"),
        `every NodeHealVolume since the restart answered OK: ${restartHeals.map((c) => c.code).join(", ")}`,
      );
      // The first heal of each volume after the restart is the one that healed it (later ones find it healthy).
      const healedAt = VOLUMES.map((v) => Math.min(...restartHeals.filter((c) => (c.request as { volumeId: string }).volumeId === v.handle).map((c) => c.t1)));
      const lastHealed = Math.max(...healedAt);
      const firstHeal = Math.min(...restartHeals.map((c) => c.t0));
      story.expect(Number.isFinite(lastHealed) && lastHealed > backAt, "every volume's heal reached the driver after it came back");
      story.line(
        `driver back -> last volume healed: ${Math.round(lastHealed - backAt)} ms (driver-stub ready ${new Date(backAt).toISOString()}, last volume healed ${new Date(lastHealed).toISOString()}, from its call log)`,
      );
      story.line(
        `  ${Math.round(firstHeal - backAt)} ms of it before the first heal reached the driver: the sidecar reconnecting (backoff up to 1 s) and recording the restart, the controller seeing it`,
      );
      story.line(`CSIAddonsNode annotation ${HANDLED_RESTART}: ${JSON.stringify(marker)}`);
      const secretHeal = restartHeals.find(
        (c) => (c.request as { volumeId: string }).volumeId === VOLUMES[0]!.handle && (c.request as { secrets?: object }).secrets,
      );
      const secretKeys = Object.keys((secretHeal?.request as { secrets?: Record<string, string> } | undefined)?.secrets ?? {});
      story.expect(secretKeys.length > 0, `the driver got ${VOLUMES[0]!.pv}'s stage secret`);
      story.line(
        `${VOLUMES[0]!.pv}'s heal carried stage secret ${STAGE_SECRET.namespace}/${STAGE_SECRET.name} (keys ${secretKeys.join(", ")}; values never logged)`,
      );

      story.step("Check: all healthy, the kubelet's CSI socket untouched, and what the metrics say");
      for (const v of VOLUMES) {
        const r = await health(v.pv);
        story.expect(r.ok && r.value.health?.state === State.HEALTHY, `${v.pv} ends HEALTHY`);
        rows.get(v.pv)!.final = stateName(r.value.health!.state);
      }
      story.line(`GetVolumeHealth: all ${VOLUMES.length} volumes HEALTHY`);
      const csi = stub.csiCalls();
      story.expect(csi.length === 0, `nothing called the driver's CSI socket, but it got ${csi.length} calls`);
      story.line(`calls on the driver's CSI socket (NodeStageVolume and friends belong to the kubelet): ${csi.length}`);
      const sidecarMetrics = await sidecar.metrics();
      const healCount =
        /csi_sidecar_operations_seconds_count\{[^}]*method_name="\/healer\.v1\.VolumeHealerNode\/NodeHealVolume",grpc_status_code="OK"\}\s+(\d+)/.exec(
          sidecarMetrics,
        )?.[1];
      story.expect(healCount !== undefined, "the sidecar's /metrics counts the driver's NodeHealVolume calls");
      story.line(
        `sidecar /metrics: csi_sidecar_operations_seconds counted ${healCount} successful NodeHealVolume calls to the driver (since the sidecar started)`,
      );
      const controllerMetrics = await controller.metrics();
      const heals = samples(controllerMetrics, `${HEALS_METRIC}_total`).filter((x) => x.value > 0);
      const restartAnswers = metricSum(controllerMetrics, `${HEALS_METRIC}_total`, { trigger: "restart" });
      story.expect(restartAnswers === VOLUMES.length, `the controller's /metrics counts ${VOLUMES.length} restart heals, got ${restartAnswers}`);
      story.line(`controller /metrics: ${HEALS_METRIC}_total: ${heals.map((x) => `${x.labels["trigger"]} ${x.labels["result"]} ${x.value}`).join(", ")}`);
      const restarts = metricSum(controllerMetrics, `${RESTART_METRIC}_count`);
      story.expect(restarts >= 1, "the controller's /metrics has observed the restart heal");
      story.line(
        `controller /metrics: ${RESTART_METRIC}: ${restarts} restart(s), ${metricSum(controllerMetrics, `${RESTART_METRIC}_sum`).toFixed(3)} s in all (from driverRestartedAt to the last volume answered)`,
      );
    }),
  );

  if (cleanup.interrupted) return new Promise(() => {}); // the signal handler cleans up and exits
  say("\nSummary");
  say(
    formatTable(
      ["PV", "volume", "kind", "start", "first pass", "mount dies", "IF_ABNORMAL", "after crash", "ALWAYS", "end"],
      VOLUMES.map((v) => {
        const r = rows.get(v.pv)!;
        return [v.pv, v.handle, v.kind, r.start, r.firstPass, r.fault, r.pass, r.restart, r.healAll, r.final].map((c) => c || "?");
      }),
    ),
  );
  if (outcome.failed) {
    say(`\nFAILED in step "${outcome.failed.step}": ${outcome.failed.reason}`);
    say(`(${outcome.checks} checks passed before that)`);
  } else {
    passed = true;
    say(`\nAll ${outcome.checks} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
  }

  if (opts.hold && passed) {
    say(`\nHolding: everything keeps running. Try:`);
    say(`  kubectl --kubeconfig ${kube!.kubeconfigPath} get csiaddonsnodes -n ${NAMESPACE} -o yaml`);
    say(`  kubectl --kubeconfig ${kube!.kubeconfigPath} get events -A`);
    const grpcurl = `grpcurl -cacert ${tls!.certFile} -servername localhost -H "authorization: Bearer ${OPERATOR.token}"`;
    say(`  ${grpcurl} ${sidecar!.address} list`);
    say(`  ${grpcurl} -d '{"pv_name":"pv-raw"}' ${sidecar!.address} sidecar.v1.VolumeHealer/GetVolumeHealth`);
    say(`  curl -s http://127.0.0.1:${String(controller!.started["httpPort"])}/metrics`);
    say(`  edit ${stub!.stateFile} to break a volume, and watch the controller heal it within ${CHECK_INTERVAL}`);
    say(`Press Ctrl-C to stop.`);
    return new Promise(() => {}); // Ctrl-C: the signal handler cleans up and exits 0
  }

  say("\nStopping everything this demo started ...");
  const failedCleanup = await cleanup.run();
  for (const f of failedCleanup) say(`cleanup failed: ${f}`);
  return passed && failedCleanup.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    process.stderr.write(`demo: ${err instanceof Error ? err.stack : String(err)}\n`);
    await cleanup.run();
    process.exit(1);
  },
);
