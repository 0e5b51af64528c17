// How a ratio is printed beside its target.

/** Two decimals, or three when two would read as the target itself: 1.502x is not <= 1.5x. */
export const ratioVs = (v: number, target: number): string => `${v.toFixed(v.toFixed(2) === target.toFixed(2) && v !== target ? 3 : 2)}x`;
