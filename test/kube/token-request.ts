// TokenRequest (POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token): a token for an existing
// ServiceAccount, bound to the audiences asked for (the API server's when none are), valid until
// status.expirationTimestamp. Like the real server: expirationSeconds defaults to 3600 and must be
// at least 600, the lifetime is capped by the server's maximum, and a token stops authenticating
// when its ServiceAccount is deleted or replaced (another uid).
import { randomBytes } from "node:crypto";
import { type Auth, KUBE_API_AUDIENCES } from "./auth.js";
import { checkTypeMeta } from "./admit.js";
import { isObject, type Obj } from "./json.js";
import type { Ops } from "./ops.js";
import type { ResourceType } from "./resources.js";
import { badRequest, invalid, invalidObject, type FieldError } from "./status.js";

/** The TokenRequest kind as checkTypeMeta and invalidObject name it. */
export const tokenRequestType = { group: "authentication.k8s.io", version: "v1", kind: "TokenRequest" } as const;

export function issueToken(ops: Ops, auth: Auth, saType: ResourceType, namespace: string, name: string, raw: unknown): Obj {
  const body = checkTypeMeta({ ...saType, ...tokenRequestType }, raw ?? { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest" });
  const spec = (isObject(body.spec) ? body.spec : {}) as { audiences?: unknown; expirationSeconds?: unknown; boundObjectRef?: unknown };
  if (spec.boundObjectRef) throw badRequest("spec.boundObjectRef is not supported by the kube-api harness");
  const errs: FieldError[] = [];
  const seconds = spec.expirationSeconds ?? 3600;
  if (typeof seconds !== "number" || !Number.isInteger(seconds)) errs.push(invalid("spec.expirationSeconds", seconds, "must be an integer"));
  else if (seconds < 600) errs.push(invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"));
  else if (seconds > 2 ** 32) errs.push(invalid("spec.expirationSeconds", seconds, "may not specify a duration larger than 2^32 seconds"));
  const asked = spec.audiences ?? [];
  if (!Array.isArray(asked) || asked.some((a) => typeof a !== "string" || a === ""))
    errs.push(invalid("spec.audiences", asked, "must be a list of non-empty strings"));
  if (errs.length > 0) throw invalidObject({ group: tokenRequestType.group, kind: tokenRequestType.kind }, name, errs);

  const sa = ops.get(saType, namespace, name); // 404 for a missing ServiceAccount, as the real server answers
  const uid = String((sa.metadata as Obj).uid);
  const lifetime = Math.min(seconds as number, auth.maxTokenExpirationSeconds ?? Infinity);
  const issued = Date.now();
  const expiresAt = issued + lifetime * 1000;
  const audiences = (asked as string[]).length > 0 ? [...(asked as string[])] : [...KUBE_API_AUDIENCES];
  const token = `kube-api-sa.${randomBytes(24).toString("base64url")}`;
  auth.addToken(token, {
    username: `system:serviceaccount:${namespace}:${name}`,
    uid,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`],
    audiences,
    expiresAt,
    revoked: () => {
      try {
        if (String((ops.get(saType, namespace, name).metadata as Obj).uid) === uid) return undefined;
      } catch {
        // gone: refused below
      }
      return `service account ${namespace}/${name} with uid ${uid} no longer exists`;
    },
  });
  return {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    metadata: { name, namespace, creationTimestamp: new Date(issued).toISOString().replace(/\.\d+Z$/, "Z") },
    spec: { audiences, expirationSeconds: lifetime, boundObjectRef: null },
    status: { token, expirationTimestamp: new Date(expiresAt).toISOString().replace(/\.\d+Z$/, "Z") },
  };
}
