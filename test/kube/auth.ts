// Who a bearer token is, and what that identity may do. The token table stands in for the API
// server's authenticators (service-account tokens with audiences), the allow rules for RBAC
// (rules bound to a user or to one of the user's groups). The same tables answer TokenReview and
// SubjectAccessReview, so a sidecar test proves both its API access and its callers' checks.

/** The audience of the API server's own tokens (service-account tokens default to it). */
export const KUBE_API_AUDIENCE = "https://kubernetes.default.svc.cluster.local";
/** The API server's audiences (its --api-audiences, which default to the service-account issuer). */
export const KUBE_API_AUDIENCES: readonly string[] = [KUBE_API_AUDIENCE];

export interface TokenUser {
  username: string;
  uid?: string;
  groups?: string[];
  audiences?: string[];
  /** The authenticator's extra (a bound token's pod and node, a scoped token's scopes). */
  extra?: Record<string, string[]>;
  expired?: boolean;
  /** Epoch ms after which the token is refused (TokenRequest's expirationTimestamp). */
  expiresAt?: number;
  /** Why a token is no longer good though unexpired (its ServiceAccount deleted or recreated); undefined = good. */
  revoked?: () => string | undefined;
}
export interface Rule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  namespace?: string;
  /**
   * Granted only to a user whose extra holds each key with that value: an authorizer beside RBAC
   * that reads the user's extra, as a webhook authorizer or OpenShift's scoped tokens do (RBAC
   * itself never reads it). Absent: RBAC's rule, whatever the extra.
   */
  extra?: Record<string, string>;
}
export interface Subject {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** What is being done, as an authorizer sees it (resource includes "/subresource"). */
export type Attributes =
  { kind: "resource"; verb: string; group: string; resource: string; namespace?: string; name?: string } | { kind: "path"; verb: string; path: string };

/** Discovery and version endpoints every authenticated user may read (system:discovery). */
const discoveryPaths = [
  /^\/api\/?$/,
  /^\/api\/v1\/?$/,
  /^\/apis(\/[^/]+){0,2}\/?$/,
  /^\/version\/?$/,
  /^\/openapi(\/.*)?$/,
  /^\/healthz/,
  /^\/livez/,
  /^\/readyz/,
];

export class Auth {
  private readonly tokens = new Map<string, TokenUser>();
  private readonly rules = new Map<string, Rule[]>();
  requireRbac: boolean;
  /**
   * The server's --service-account-max-token-expiration: a TokenRequest asking longer gets this
   * lifetime, reported in status.expirationTimestamp as the real server does. Tests set it below
   * the real floor (1h) to see expiry and refresh without waiting; undefined = no cap.
   */
  maxTokenExpirationSeconds: number | undefined;

  constructor(
    readonly adminToken: string,
    requireRbac: boolean,
  ) {
    this.requireRbac = requireRbac;
    this.tokens.set(adminToken, { username: "kube:admin", groups: ["system:masters"] });
  }

  addToken(token: string, user: TokenUser): void {
    this.tokens.set(token, { ...user, groups: [...(user.groups ?? [])] });
  }

  /** The tokens issued to `username`, with their audiences (tests replay them elsewhere). */
  tokensOf(username: string): { token: string; audiences: string[] }[] {
    return [...this.tokens].filter(([, u]) => u.username === username).map(([token, u]) => ({ token, audiences: [...(u.audiences ?? [])] }));
  }

  allow(subject: string, rule: Rule): void {
    const list = this.rules.get(subject) ?? [];
    list.push({ ...rule });
    this.rules.set(subject, list);
  }

  clearRules(subject?: string): void {
    if (subject === undefined) this.rules.clear();
    else this.rules.delete(subject);
  }

  /**
   * Authenticates a token for `audiences`; empty = the API server's own audiences, as a TokenReview
   * without spec.audiences is and every request to the API server itself. The token is valid when
   * its audiences and the wanted ones intersect; the intersection is what status.audiences reports.
   * A token without audiences (a legacy service-account token, a static token) is valid for the API
   * server's audiences only, as the real authenticators treat audience-less tokens.
   */
  review(token: string | undefined, audiences: string[] = []): { subject?: Subject; audiences?: string[]; error?: string } {
    const u = token ? this.tokens.get(token) : undefined;
    if (!u) return { error: "invalid bearer token" };
    if (u.expired || (u.expiresAt !== undefined && Date.now() >= u.expiresAt)) return { error: "token has expired" };
    const revoked = u.revoked?.();
    if (revoked) return { error: revoked };
    const wanted = audiences.length > 0 ? audiences : KUBE_API_AUDIENCES;
    const held = u.audiences?.length ? u.audiences : KUBE_API_AUDIENCES;
    const granted = wanted.filter((a) => held.includes(a));
    if (granted.length === 0) return { error: `token audiences ${JSON.stringify(held)} is invalid for the target audiences ${JSON.stringify(wanted)}` };
    const groups = [...(u.groups ?? [])];
    if (!groups.includes("system:authenticated")) groups.push("system:authenticated");
    return { subject: { username: u.username, uid: u.uid, groups, ...(u.extra ? { extra: u.extra } : {}) }, audiences: granted };
  }

  /** The identity behind an Authorization header, or undefined (→ 401). */
  authenticate(header: string | undefined): Subject | undefined {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
    return this.review(m?.[1]).subject;
  }

  /** RBAC-style decision from the allow rules (system:masters may do anything). */
  allowed(s: Subject, a: Attributes): boolean {
    if (s.groups.includes("system:masters")) return true;
    if (a.kind === "path") return s.groups.includes("system:authenticated") && discoveryPaths.some((re) => re.test(a.path));
    const rules = [s.username, ...s.groups].flatMap((k) => this.rules.get(k) ?? []);
    return rules.some((r) => ruleMatches(r, a) && extraMatches(r, s));
  }

  /** The reason text of a real 403: `User "u" cannot <verb> resource "<res>" in API group "<g>" ...`. */
  static denial(s: Subject, a: Attributes): string {
    if (a.kind === "path") return `User "${s.username}" cannot ${a.verb} path "${a.path}"`;
    const where = a.namespace ? `in the namespace "${a.namespace}"` : "at the cluster scope";
    return `User "${s.username}" cannot ${a.verb} resource "${a.resource}" in API group "${a.group}" ${where}`;
  }
}

const has = (list: string[], v: string) => list.includes("*") || list.includes(v);

function extraMatches(r: Rule, s: Subject): boolean {
  return Object.entries(r.extra ?? {}).every(([k, v]) => s.extra?.[k]?.includes(v) === true);
}

function ruleMatches(r: Rule, a: Extract<Attributes, { kind: "resource" }>): boolean {
  if (!has(r.verbs, a.verb) || !has(r.apiGroups, a.group)) return false;
  // As RBAC's ResourceMatches: "x" never covers "x/sub"; "x/*" covers every subresource of x, "*/sub" that subresource of all.
  const [base, sub] = a.resource.split("/");
  const resourceOk =
    r.resources.includes("*") ||
    r.resources.includes(a.resource) ||
    (sub !== undefined && (r.resources.includes(`${base}/*`) || r.resources.includes(`*/${sub}`)));
  if (!resourceOk) return false;
  if (r.resourceNames?.length && (!a.name || !r.resourceNames.includes(a.name))) return false;
  if (r.namespace !== undefined && r.namespace !== a.namespace) return false;
  return true;
}
