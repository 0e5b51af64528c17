// Moved to common/ (shared with the controller, DESIGN 2); kept so existing imports stay valid.
export * from "../../common/net/listen-host.js";
