// Who may call: a bearer token authenticated by a TokenReview and authorized by a
// SubjectAccessReview against a configured rule (AUTH-POLICY). The named audiences go into one
// review; "@api-server" is a second review without audiences, which the API server answers for its
// own audiences (what the upstream csi-addons controller's token carries). Either one authenticates:
// the audience only limits token replay, the SubjectAccessReview decides. Decisions are cached
// briefly, bounded in size, keyed by a hash of the token so the token itself is never kept in clear.
import { createHash } from "node:crypto";
import { API_SERVER_AUDIENCE, type AuthzRule } from "../config/config.js";
import { DomainError, permissionDenied, unauthenticated, unavailable } from "../errors.js";
import { KubeError, type KubeApi, type UserInfo } from "../kube/api.js";
import type { Middleware } from "../server/context.js";
import { TtlCache } from "../util/ttl-cache.js";

export interface AuthOptions {
  kube: KubeApi;
  /** Named audiences and/or API_SERVER_AUDIENCE. */
  audiences: string[];
  namespace: string;
  rule: AuthzRule;
  cacheTtlMs: number;
  maxEntries?: number;
  requestTimeoutMs?: number;
}

type Decision = { user: UserInfo } | { error: DomainError };

const MAX_TOKEN_LENGTH = 16 * 1024;

export function authMiddleware(opts: AuthOptions): Middleware {
  const cache = new TtlCache<Decision>(opts.cacheTtlMs, opts.maxEntries ?? 1024);
  const named = opts.audiences.filter((a) => a !== API_SERVER_AUDIENCE);
  const apiServer = opts.audiences.includes(API_SERVER_AUDIENCE);
  const accepted = [...named, ...(apiServer ? ["the API server's"] : [])].join(" or ");

  async function authenticate(token: string, signal: AbortSignal): Promise<UserInfo | undefined> {
    const user = named.length > 0 ? await opts.kube.reviewToken(token, named, signal) : undefined;
    return user ?? (apiServer ? await opts.kube.reviewToken(token, undefined, signal) : undefined);
  }

  async function decide(token: string): Promise<Decision> {
    const signal = AbortSignal.timeout(opts.requestTimeoutMs ?? 10_000);
    try {
      const user = await authenticate(token, signal);
      if (!user) return { error: unauthenticated(`bearer token is not valid for audience ${accepted}`) };
      const { verb, group, resource } = opts.rule;
      const allowed = await opts.kube.reviewAccess(user, { namespace: opts.namespace, verb, group, resource }, signal);
      if (!allowed) {
        return {
          error: permissionDenied(`user ${user.username} may not ${verb} ${resource}${group ? "." + group : ""} in namespace ${opts.namespace}`),
        };
      }
      return { user };
    } catch (err) {
      const why = err instanceof KubeError ? `${err.status || "unreachable"} ${err.reason}` : "error";
      throw unavailable(`cannot verify the caller right now (Kubernetes API: ${why.trim()}); retry`);
    }
  }

  return async (req, ctx, next) => {
    const header = ctx.metadata.get("authorization")[0];
    const m = typeof header === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!m) throw unauthenticated("missing bearer token: send metadata 'authorization: Bearer <token>'");
    const token = m[1]!;
    if (token.length > MAX_TOKEN_LENGTH) throw unauthenticated("bearer token too long");
    const key = createHash("sha256").update(token).digest("hex");
    // Transient failures (decide() throws) are not cached: the next call asks again.
    const decision = await cache.get(key, () => decide(token));
    if ("error" in decision) throw decision.error;
    ctx.user = decision.user;
    return next(req, ctx);
  };
}
