// Schema texts for reading: pretty-printed (Avro and JSON Schema are JSON, indented by 2; Protobuf is
// already .proto text), and a line diff between two of them, drawn from jsdiff's diffLines (the vendored
// window.Diff: api/ui/vendor/README.md). Lines are put in the page as text only (dom.js's invariant).
import { h } from "./dom.js";

export function pretty(text, schemaType) {
  if (schemaType === "PROTOBUF") return text;
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

// Every line of `before` and `after`, marked as removed, added or kept, with a count of each.
export function diffLines(before, after) {
  const withEnd = (t) => (t.endsWith("\n") ? t : `${t}\n`);
  const lines = [];
  for (const part of window.Diff.diffLines(withEnd(before), withEnd(after))) {
    const kind = part.added ? "add" : part.removed ? "del" : "same";
    for (const line of part.value.replace(/\n$/, "").split("\n")) lines.push({ kind, line });
  }
  return lines;
}

export function diffView(before, after) {
  const lines = diffLines(before, after);
  const added = lines.filter((l) => l.kind === "add").length;
  const removed = lines.filter((l) => l.kind === "del").length;
  const sign = { add: "+ ", del: "- ", same: "  " };
  return h("div", {},
    h("p", { class: "muted", id: "diff-summary" }, added || removed ? `+${added} −${removed} lines` : "The two versions have the same text."),
    h("pre", { class: "diff schema" }, lines.map((l) => h("span", { class: `line ${l.kind}` }, sign[l.kind] + l.line))));
}
