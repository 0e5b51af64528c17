// TokenReview, SubjectAccessReview and SelfSubjectAccessReview: create-only resources that are
// answered, not stored. Like the real server they answer 201 with the verdict in status — an
// unknown token is `authenticated: false`, never an HTTP error — and echo the spec back.
import type { Attributes, Auth, Subject } from "./auth.js";
import { checkTypeMeta } from "./admit.js";
import { isObject, type Obj } from "./json.js";
import { groupKind, type ResourceType } from "./resources.js";
import { badRequest, type FieldError, invalid, invalidObject } from "./status.js";

function tokenReview(auth: Auth, body: Obj): Obj {
  const spec = (body.spec ?? {}) as { token?: string; audiences?: string[] };
  const r = auth.review(spec.token, spec.audiences ?? []);
  const status: Obj = { authenticated: r.subject !== undefined };
  if (r.subject) {
    const user: Obj = { username: r.subject.username, groups: r.subject.groups };
    if (r.subject.uid) user.uid = r.subject.uid;
    if (r.subject.extra) user.extra = r.subject.extra;
    status.user = user;
    status.audiences = r.audiences;
  } else {
    status.user = {};
    status.error = r.error;
  }
  return { ...body, metadata: { creationTimestamp: null }, status };
}

function attributesOf(spec: Obj): Attributes {
  if (isObject(spec.resourceAttributes)) {
    const ra = spec.resourceAttributes as Record<string, string | undefined>;
    const resource = ra.subresource ? `${ra.resource ?? ""}/${ra.subresource}` : (ra.resource ?? "");
    return { kind: "resource", verb: ra.verb ?? "", group: ra.group ?? "", resource, namespace: ra.namespace || undefined, name: ra.name || undefined };
  }
  const nra = (spec.nonResourceAttributes ?? {}) as Record<string, string | undefined>;
  return { kind: "path", verb: nra.verb ?? "", path: nra.path ?? "" };
}

function accessReview(t: ResourceType, auth: Auth, body: Obj, who: Subject | undefined): Obj {
  const spec = (isObject(body.spec) ? body.spec : {}) as Obj;
  const errs: FieldError[] = [];
  if (isObject(spec.resourceAttributes) === isObject(spec.nonResourceAttributes))
    errs.push(invalid("spec.resourceAttributes", null, "exactly one of nonResourceAttributes or resourceAttributes must be specified"));
  let subject = who;
  if (!subject) {
    const groups = Array.isArray(spec.groups) ? (spec.groups as string[]) : [];
    if (!spec.user && groups.length === 0) errs.push(invalid("spec.user", "", "at least one of user or group must be specified"));
    const extra = isObject(spec.extra) ? (spec.extra as Record<string, string[]>) : undefined;
    subject = { username: String(spec.user ?? ""), groups, ...(extra ? { extra } : {}) };
  }
  if (errs.length > 0) throw invalidObject(groupKind(t), "", errs);
  const allowed = auth.allowed(subject, attributesOf(spec));
  const status: Obj = { allowed };
  if (allowed) status.reason = `allowed by a kube-api harness rule for "${subject.username}"`;
  return { ...body, metadata: { creationTimestamp: null }, status };
}

/** Answers a review create; `caller` is the authenticated requester (for SelfSubjectAccessReview). */
export function answerReview(t: ResourceType, auth: Auth, raw: unknown, caller: Subject): Obj {
  const body = checkTypeMeta(t, raw);
  const errs = t.validate?.(body) ?? [];
  if (errs.length > 0) throw invalidObject(groupKind(t), "", errs);
  if (t.kind === "TokenReview") {
    if (!(body.spec as Obj | undefined)?.token) throw badRequest("token is required for TokenReview in authentication");
    return tokenReview(auth, body);
  }
  return accessReview(t, auth, body, t.kind === "SelfSubjectAccessReview" ? caller : undefined);
}
