// The Secret a fence, replication or group request names (secret_name, secret_namespace): read
// through the shared secret cache, its data handed to the driver, only its name ever logged. A
// missing or misnamed one answers what the upstream sidecar answers for that service
// (INVALID_ARGUMENT for fences, INTERNAL for replication and groups); one the sidecar may not read,
// FAILED_PRECONDITION.
import { DomainError, type ErrorKind } from "../errors.js";
import { isDnsSubdomain } from "../relay/names.js";
import type { CallContext } from "../server/context.js";
import type { UpstreamDeps } from "./relay.js";

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export async function namedSecret(
  deps: UpstreamDeps,
  ctx: CallContext,
  req: { secretName: string; secretNamespace: string },
  failure: ErrorKind,
  signal: AbortSignal,
): Promise<Record<string, string>> {
  const { secretName: name, secretNamespace: namespace } = req;
  const fail = (why: string) => new DomainError(failure, `secret ${JSON.stringify(namespace)}/${JSON.stringify(name)}: ${why}`);
  if (!DNS1123_LABEL.test(namespace)) throw fail("secret_namespace is not a valid namespace name");
  if (!isDnsSubdomain(name)) throw fail("secret_name is not a valid Secret name");
  ctx.fields["secret"] = `${namespace}/${name}`;
  // One the sidecar may not read (403) is FAILED_PRECONDITION, as every API refusal (server/status.ts);
  // upstream's controllers only record the message and requeue, whatever the code.
  const data = await deps.secrets.get(namespace, name, signal);
  if (!data) throw fail("not found");
  return data;
}
