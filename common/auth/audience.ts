// The audience that binds a token to one node's sidecars (least authority): the healer controller asks
// the TokenRequest API for it, and each sidecar accepts it for its own node only, so a token read
// from one node's connection is refused by every other node's sidecar.
export const NODE_AUDIENCE_PREFIX = "csi-addons-healer/";

export const nodeAudience = (node: string): string => `${NODE_AUDIENCE_PREFIX}${node}`;
