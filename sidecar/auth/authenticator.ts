// Who may call: a bearer token authenticated by a TokenReview and authorized by a
// SubjectAccessReview (DESIGN 4.6). The named audiences go into one review (by default only this
// node's, csi-addons-healer/<node>, which the healer controller's per-node token carries);
// "@api-server" is a second review without audiences, which the API server answers for its own
// audiences (what the upstream csi-addons controller's token carries). Either one authenticates:
// the audience limits where a token can be replayed, the SubjectAccessReview decides. Per service
// family (families.ts) the review asks `call` on csiaddonsnodes/<family>; with the weaker single
// permission, `call` on csiaddonsnodes for every service. Decisions are cached briefly, bounded in
// size, keyed by a hash of the token so the token itself is never kept in clear; what reviewing
// tokens never seen before may cost the API server is bounded (review-budget.ts).
import { createHash } from "node:crypto";
import { API_SERVER_AUDIENCE, type AuthzRule } from "../config/config.js";
import { DomainError, permissionDenied, unauthenticated, unavailable } from "../errors.js";
import { KubeError, type KubeApi, type UserInfo } from "../kube/api.js";
import type { Middleware } from "../server/context.js";
import { TtlCache } from "../util/ttl-cache.js";
import { ReviewBudget } from "./review-budget.js";
import { accessOf, FAMILIES } from "./families.js";

/** The identity pass-through: open to a caller that may call at least one family (in order, each answer cached). */
async function anyFamily(may: (subresource: string) => Promise<May>): Promise<boolean> {
  for (const f of FAMILIES) if (!(await may(f)).error) return true;
  return false;
}

export interface AuthOptions {
  kube: KubeApi;
  /** Named audiences and/or API_SERVER_AUDIENCE. */
  audiences: string[];
  namespace: string;
  rule: AuthzRule;
  /** The weaker choice: one permission (rule, no subresource) opens every service (default false). */
  singlePermission?: boolean;
  cacheTtlMs: number;
  maxEntries?: number;
  requestTimeoutMs?: number;
  /** What verifying callers may cost the API server (review-budget.ts); its defaults when absent. */
  budget?: ReviewBudget;
}

type Who = { user: UserInfo } | { error: DomainError };
type May = { error?: DomainError };

const MAX_TOKEN_LENGTH = 16 * 1024;

export function authMiddleware(opts: AuthOptions): Middleware {
  const maxEntries = opts.maxEntries ?? 1024;
  const users = new TtlCache<Who>(opts.cacheTtlMs, maxEntries);
  const grants = new TtlCache<May>(opts.cacheTtlMs, maxEntries);
  const named = opts.audiences.filter((a) => a !== API_SERVER_AUDIENCE);
  const apiServer = opts.audiences.includes(API_SERVER_AUDIENCE);
  const accepted = [...named, ...(apiServer ? ["the API server's"] : [])].join(" or ");
  const { verb, group, resource } = opts.rule;
  const single = opts.singlePermission ?? false;
  const budget = opts.budget ?? new ReviewBudget();

  // Transient failures (the loads throw) are not cached: the next call asks again.
  async function ask<T>(what: (signal: AbortSignal) => Promise<T>): Promise<T> {
    try {
      return await what(AbortSignal.timeout(opts.requestTimeoutMs ?? 10_000));
    } catch (err) {
      const why = err instanceof KubeError ? `${err.status || "unreachable"} ${err.reason}` : "error";
      throw unavailable(`cannot verify the caller right now (Kubernetes API: ${why.trim()}); retry`);
    }
  }

  const authenticate = (token: string): Promise<Who> =>
    ask(async (signal) => {
      const user =
        (named.length > 0 ? await opts.kube.reviewToken(token, named, signal) : undefined) ??
        (apiServer ? await opts.kube.reviewToken(token, undefined, signal) : undefined);
      return user ? { user } : { error: unauthenticated(`bearer token is not valid for audience ${accepted}`) };
    });

  const authorize = (user: UserInfo, subresource: string | undefined): Promise<May> =>
    ask(async (signal) => {
      const allowed = await opts.kube.reviewAccess(user, { namespace: opts.namespace, verb, group, resource, ...(subresource ? { subresource } : {}) }, signal);
      if (allowed) return {};
      const what = `${resource}${subresource ? `/${subresource}` : ""}${group ? ` (API group ${group})` : ""}`;
      return { error: permissionDenied(`user ${user.username} may not ${verb} ${what} in namespace ${opts.namespace}`) };
    });

  return async (req, ctx, next) => {
    const header = ctx.metadata.get("authorization")[0];
    const m = typeof header === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!m) throw unauthenticated("missing bearer token: send metadata 'authorization: Bearer <token>'");
    const token = m[1]!;
    if (token.length > MAX_TOKEN_LENGTH) throw unauthenticated("bearer token too long");
    const key = createHash("sha256").update(token).digest("hex");
    const who = await users.get(key, (shared) =>
      budget.review(
        key,
        shared,
        () => authenticate(token),
        (w) => !("error" in w),
      ),
    );
    if ("error" in who) throw who.error;
    const access = accessOf(ctx.method);
    if (access.kind === "unknown") throw permissionDenied(`service ${access.service} belongs to no authorization family; no caller may call it`);
    const may = (subresource: string | undefined) => grants.get(`${key}|${subresource ?? ""}`, () => authorize(who.user, subresource));
    if (single || access.kind === "family") {
      const answer = await may(single || access.kind !== "family" ? undefined : access.family);
      if (answer.error) throw answer.error;
    } else if (!(await anyFamily(may))) {
      throw permissionDenied(`user ${who.user.username} may not ${verb} any service family (${resource}/<family>) in namespace ${opts.namespace}`);
    }
    ctx.user = who.user;
    return next(req, ctx);
  };
}
