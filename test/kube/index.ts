// Public entry point of the in-memory Kubernetes API (tests, demo and bench import from here).
export { startKubeApi, type KubeApi, type KubeApiOptions } from "./server.js";
export { KUBE_API_AUDIENCE, KUBE_API_AUDIENCES, type Rule, type TokenUser } from "./auth.js";
export type { Match } from "./faults.js";
export { ApiError, type Status } from "./status.js";
