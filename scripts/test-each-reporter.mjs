// Node test-runner reporter for test-each.mjs: one JSON line per finished test or suite.
export default async function* reporter(source) {
  for await (const ev of source) {
    if (ev.type !== "test:pass" && ev.type !== "test:fail") continue;
    const d = ev.data;
    yield `${JSON.stringify({ ok: ev.type === "test:pass", name: d.name, suite: d.details?.type === "suite", skip: d.skip !== undefined && d.skip !== false, file: d.file })}\n`;
  }
}
