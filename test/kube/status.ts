// Kubernetes Status objects and the errors that carry them. The shapes and messages follow
// k8s.io/apimachinery/pkg/api/errors, because clients (and our tests) parse `reason`, `code`
// and `details` exactly; a harness that answered differently would let wrong client code pass.

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}
export interface Status {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure" | "Success";
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** What a resource is called in messages: plural plus group, as schema.GroupResource prints it. */
export interface GroupResource {
  group: string;
  resource: string;
}
/** What a kind is called in Invalid messages: Kind plus group, as schema.GroupKind prints it. */
export interface GroupKind {
  group: string;
  kind: string;
}

const qualified = (name: string, group: string) => (group ? `${name}.${group}` : name);

/** An HTTP answer that is a Status object. Handlers throw it; the server writes it. */
export class ApiError extends Error {
  constructor(
    readonly status: Status,
    readonly headers: Record<string, string> = {},
  ) {
    super(status.message ?? status.reason ?? String(status.code));
  }
  get code(): number {
    return this.status.code;
  }
}

function failure(code: number, reason: string, message: string, details?: StatusDetails): ApiError {
  const status: Status = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
  if (details) status.details = details;
  return new ApiError(status);
}

function grDetails(gr: GroupResource, name?: string): StatusDetails {
  const d: StatusDetails = {};
  if (name) d.name = name;
  if (gr.group) d.group = gr.group;
  d.kind = gr.resource;
  return d;
}

export const notFound = (gr: GroupResource, name: string) =>
  failure(404, "NotFound", `${qualified(gr.resource, gr.group)} "${name}" not found`, grDetails(gr, name));

/** The answer for a path the server has no handler for (unknown group, version or resource). */
export const pathNotFound = () => failure(404, "NotFound", "the server could not find the requested resource", {});

export const alreadyExists = (gr: GroupResource, name: string) =>
  failure(409, "AlreadyExists", `${qualified(gr.resource, gr.group)} "${name}" already exists`, grDetails(gr, name));

export const conflict = (gr: GroupResource, name: string, why: string) =>
  failure(409, "Conflict", `Operation cannot be fulfilled on ${qualified(gr.resource, gr.group)} "${name}": ${why}`, grDetails(gr, name));

export const staleConflict = (gr: GroupResource, name: string) =>
  conflict(gr, name, "the object has been modified; please apply your changes to the latest version and try again");

export const forbidden = (gr: GroupResource, name: string | undefined, why: string) =>
  failure(403, "Forbidden", `${qualified(gr.resource, gr.group)}${name ? ` "${name}"` : ""} is forbidden: ${why}`, grDetails(gr, name));

export const badRequest = (message: string) => failure(400, "BadRequest", message);

export const unauthorized = () => failure(401, "Unauthorized", "Unauthorized");

export const methodNotAllowed = (message: string) => failure(405, "MethodNotAllowed", message);

export const unsupportedMediaType = (contentType: string, accepted: string[]) =>
  failure(415, "UnsupportedMediaType", `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`, {
    causes: [{ reason: "UnexpectedServerResponse", message: contentType }],
  });

export const expired = (message: string) => failure(410, "Expired", message);

/** 429 for an eviction a PodDisruptionBudget does not allow now (apierrors.NewTooManyRequests, no Retry-After). */
export const evictionRefused = (cause: string) =>
  failure(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.", {
    causes: [{ reason: "DisruptionBudget", message: cause }],
  });

/** An error Status with only a code and message, as the eviction subresource builds some by hand. */
export const plainFailure = (code: number, message: string) => {
  const status: Status = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, code };
  return new ApiError(status);
};

/** Faults injected by a test: the statuses a real, overloaded or broken API server answers with. */
export function injected(code: 500 | 503 | 429): ApiError {
  if (code === 429) {
    const e = failure(429, "TooManyRequests", "Too many requests, please try again later.", { retryAfterSeconds: 1 });
    return new ApiError(e.status, { "Retry-After": "1" });
  }
  if (code === 503) return failure(503, "ServiceUnavailable", "the server is currently unable to handle the request (injected fault)");
  return failure(500, "InternalError", "Internal error occurred: injected fault", { causes: [{ message: "injected fault" }] });
}

// ---- field errors (k8s.io/apimachinery/pkg/util/validation/field) ----

export type FieldErrorType =
  | "FieldValueRequired"
  | "FieldValueInvalid"
  | "FieldValueTypeInvalid"
  | "FieldValueNotSupported"
  | "FieldValueForbidden"
  | "FieldValueDuplicate"
  | "FieldValueTooLong"
  | "FieldValueTooMany";

export interface FieldError {
  type: FieldErrorType;
  field: string;
  badValue?: unknown;
  detail?: string;
}

const typeWords: Record<FieldErrorType, string> = {
  FieldValueRequired: "Required value",
  FieldValueInvalid: "Invalid value",
  FieldValueTypeInvalid: "Invalid value",
  FieldValueNotSupported: "Unsupported value",
  FieldValueForbidden: "Forbidden",
  FieldValueDuplicate: "Duplicate value",
  FieldValueTooLong: "Too long",
  FieldValueTooMany: "Too many",
};

/** Go's %#v-ish rendering of a bad value, as field.Error.ErrorBody prints it. */
function showValue(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (v === null || v === undefined) return "null";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

/** field.Error.ErrorBody(): the part of the message after "<field>: ". */
export function errorBody(e: FieldError): string {
  let s = typeWords[e.type];
  const valueless = ["FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong"].includes(e.type);
  if (!valueless && e.badValue !== undefined) s += `: ${showValue(e.badValue)}`;
  if (e.detail) s += `: ${e.detail}`;
  return s;
}

export const required = (field: string, detail?: string): FieldError => ({ type: "FieldValueRequired", field, detail });
export const invalid = (field: string, badValue: unknown, detail?: string): FieldError => ({ type: "FieldValueInvalid", field, badValue, detail });
export const fieldForbidden = (field: string, detail: string): FieldError => ({ type: "FieldValueForbidden", field, detail });

/** 422 Invalid, as errors.NewInvalid builds it from a field error list. */
export function invalidObject(gk: GroupKind, name: string, errs: FieldError[]): ApiError {
  const lines = errs.map((e) => `${e.field}: ${errorBody(e)}`);
  const what = lines.length === 1 ? lines[0] : `[${lines.join(", ")}]`;
  const details: StatusDetails = { name };
  if (gk.group) details.group = gk.group;
  details.kind = gk.kind;
  details.causes = errs.map((e) => ({ reason: e.type, message: errorBody(e), field: e.field }));
  return failure(422, "Invalid", `${qualified(gk.kind, gk.group)} "${name}" is invalid: ${what}`, details);
}

/** The Status a successful immediate delete answers with. */
export function deleted(gr: GroupResource, name: string, uid: string): Record<string, unknown> {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details: { ...grDetails(gr, name), uid } };
}

/** 403 for a non-resource path (no group/resource to name). */
export const forbiddenPath = (why: string) => failure(403, "Forbidden", `forbidden: ${why}`, {});
