// The Lease the upstream csi-addons controller reads to find the sidecar that takes controller
// operations: "<driver name, normalised>-csi-addons" (upstream's util.NormalizeLeaseName, itself
// csi-lib-utils' sanitizeName: every character but letters, digits and "-" becomes "-", and a
// trailing "-" gets an "X"). Like upstream, no lower-casing: the controller computes the same name.
export function leaseName(driverName: string): string {
  let name = driverName.replace(/[^a-zA-Z0-9-]/g, "-");
  if (name.endsWith("-")) name += "X";
  return `${name}-csi-addons`;
}
