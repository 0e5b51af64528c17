// How a refused request is said in errors and logs: its HTTP status and the API server's own
// message from the Status it answered with, which names what was refused and for whom (a 403
// says which verb on which resource the ServiceAccount lacks). The rest of the answer (headers,
// the Status's other fields) says nothing an operator needs.

/** "HTTP 403: events is forbidden: ...", or "HTTP 403" when the body is not a Status with a message. */
export function httpStatusText(status: number, body: unknown): string {
  return `HTTP ${status}${statusMessage(body)}`;
}

function statusMessage(body: unknown): string {
  try {
    const status = (typeof body === "string" ? JSON.parse(body) : body) as { kind?: unknown; message?: unknown } | null;
    return status?.kind === "Status" && typeof status.message === "string" && status.message !== "" ? `: ${status.message}` : "";
  } catch {
    return "";
  }
}
