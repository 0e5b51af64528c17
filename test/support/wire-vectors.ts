// Checks a generated message type against a byte vector written by hand from the .proto field
// numbers, in both directions. The vectors are never produced by the encoder under test.
import assert from "node:assert/strict";

export interface WireType<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(bytes: Uint8Array): T;
}

/** "0a 04 0a 02" → bytes; spaces are for reading only. */
export function bytes(hex: string): Uint8Array {
  const clean = hex.replace(/\s+/g, "");
  assert.match(clean, /^([0-9a-f]{2})*$/, `bad hex vector "${hex}"`);
  return Uint8Array.from(Buffer.from(clean, "hex"));
}

function spaced(b: Uint8Array): string {
  return Buffer.from(b)
    .toString("hex")
    .replace(/(..)(?!$)/g, "$1 ");
}

/** encode(object) must be exactly `hex`, and decode(hex) must be exactly `object`. */
export function assertWire<T>(type: WireType<T>, object: T, hex: string): void {
  const expected = bytes(hex);
  assert.equal(spaced(type.encode(object).finish()), spaced(expected), "encoded bytes");
  assert.deepEqual(type.decode(expected), object, "decoded object");
}

/** Decoding only: for byte orders or fields our encoder never writes (other encoders may). */
export function assertDecodes<T>(type: WireType<T>, hex: string, object: T): void {
  assert.deepEqual(type.decode(bytes(hex)), object);
}
