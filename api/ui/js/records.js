// The record browser: a page of records from the beginning, the end, an offset or a timestamp, in one
// partition or all; key/value substring filters; decoded, UTF-8, JSON, hex or base64 views; headers; gaps
// that compaction left shown as gap rows; a live tail with pause; and a form to produce a record.
// "decoded" shows a key or value framed with a registered schema's id (Confluent's wire format) as the JSON
// the agent decoded it to, with the schema's subject, version, type and id; one that does not decode shows
// its bytes as UTF-8 with the reason, and anything else as UTF-8.
import { api, describe } from "./api.js";
import { clear, flash, h, num, table, time } from "./dom.js";
import { tabs } from "./lake.js";
import { subjectHref } from "./schemas.js";

const decoder = new TextDecoder("utf-8", { fatal: true });

function fromB64(text) {
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

function toB64(bytes) {
  let raw = "";
  for (const b of bytes) raw += String.fromCharCode(b);
  return btoa(raw);
}

// Render base64 data in the chosen view. Output is text; the caller puts it in a text node.
export function view(b64, mode) {
  if (b64 === null || b64 === undefined) return "null";
  if (mode === "decoded") mode = "utf8";
  const bytes = fromB64(b64);
  if (mode === "base64") return b64;
  if (mode === "hex") return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
  let text;
  try { text = decoder.decode(bytes); } catch { return `(not UTF-8) ${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ")}`; }
  if (mode === "json") {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return `(not JSON) ${text}`; }
  }
  return text;
}

// A key or value cell: decoded with its schema where the view asks for it and the agent could.
function field(b64, typed, mode) {
  if (mode !== "decoded" || !typed) return view(b64, mode);
  if (typed.error) {
    return [h("span", { class: "typed bad" }, `not decoded (schema id ${typed.schema_id}): ${typed.error}`), view(b64, "utf8")];
  }
  // A subject is named unless every version using the id was deleted permanently.
  const where = typed.subject === null
    ? "no subject"
    : h("a", { href: subjectHref(typed.subject, { v: typed.version }) }, `${typed.subject} v${typed.version}`);
  return [
    h("span", { class: "typed" }, where, ` · ${typed.schema_type} · id ${typed.schema_id}`),
    JSON.stringify(typed.json, null, 2),
  ];
}

export async function render(main, [name], query) {
  const enc = encodeURIComponent(name);
  const topic = await api(`/v1/topics/${enc}`);
  main.append(
    h("h1", {}, "Topic ", h("span", {}, topic.name)),
    tabs(name, "tab-records"),
  );
  const partition = h("select", { id: "browse-partition" }, h("option", { value: "" }, "all"),
    topic.partitions.map((p) => h("option", { value: p.partition }, String(p.partition))));
  const start = h("select", { id: "browse-start" }, ["beginning", "end", "offset", "timestamp"].map((s) => h("option", { value: s }, s)));
  const offset = h("input", { id: "browse-offset", type: "number", min: 0, placeholder: "offset", style: "width:110px" });
  const stamp = h("input", { id: "browse-timestamp", type: "datetime-local", step: "0.001" });
  const keyFilter = h("input", { id: "filter-key", placeholder: "key contains" });
  const valueFilter = h("input", { id: "filter-value", placeholder: "value contains" });
  const mode = h("select", { id: "browse-view" }, ["decoded", "utf8", "json", "hex", "base64"].map((m) => h("option", { value: m }, m)));
  const limit = h("select", { id: "browse-limit" }, [20, 50, 100, 500].map((n) => h("option", { value: n, selected: n === 50 }, String(n))));
  if (query.get("partition")) partition.value = query.get("partition");
  const tailButton = h("button", { type: "button", id: "tail" }, "Live tail");
  const moreButton = h("button", { type: "button", id: "more", disabled: true }, "Next page");
  const status = h("span", { class: "muted", id: "browse-status" });
  const results = h("div", { id: "records" });

  let cursor = null;
  let shown = [];
  let gaps = [];
  let tailing = false;
  let timer = null;

  const params = () => ({
    partition: partition.value, limit: limit.value,
    key_contains: keyFilter.value, value_contains: valueFilter.value,
  });

  async function load(fresh) {
    const q = params();
    if (fresh || !cursor) {
      q.start = start.value;
      if (start.value === "offset") q.offset = offset.value || 0;
      if (start.value === "timestamp") q.timestamp = stamp.value ? new Date(`${stamp.value}Z`).getTime() : 0;
    } else {
      q.cursor = cursor;
    }
    const page = await api(`/v1/topics/${enc}/browse`, { query: q });
    cursor = page.cursor;
    if (fresh) { shown = []; gaps = []; }
    shown = shown.concat(page.records);
    gaps = gaps.concat(page.gaps);
    if (tailing && shown.length > 1000) shown = shown.slice(-1000);
    draw();
    moreButton.disabled = page.exhausted;
    status.textContent = `${num(shown.length)} records shown, ${num(page.scanned)} read` +
      (page.exhausted ? "; end of log" : "") +
      ` · positions ${page.positions.map((p) => `${p.partition}:${p.next_offset}/${p.high_watermark}`).join(" ").slice(0, 200)}`;
    return page;
  }

  function draw() {
    // Merge records and gap rows in (partition, offset) order within the timestamp-ordered page.
    const rows = shown.map((r) => ({ kind: "record", partition: r.partition, offset: r.offset, r }));
    for (const g of gaps) rows.push({ kind: "gap", partition: g.partition, offset: g.first, g });
    if (partition.value !== "" || rows.every((r) => r.partition === rows[0]?.partition)) {
      rows.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
    } else {
      rows.sort((a, b) => (a.r?.timestamp ?? Infinity) - (b.r?.timestamp ?? Infinity) || a.partition - b.partition || a.offset - b.offset);
    }
    const m = mode.value;
    clear(results).append(table(
      [
        { label: "Partition", cell: (x) => x.partition, num: true },
        { label: "Offset", cell: (x) => (x.kind === "gap" ? span(x.g) : x.offset), num: true },
        { label: "Timestamp", cell: (x) => (x.kind === "gap" ? "" : time(x.r.timestamp)) },
        { label: "Key", cls: "data", cell: (x) => (x.kind === "gap" ? gapText(x.g) : field(x.r.key, x.r.key_typed, m)) },
        { label: "Value", cls: "data", cell: (x) => (x.kind === "gap" ? "" : field(x.r.value, x.r.value_typed, m)) },
        { label: "Headers", cls: "headers", cell: (x) => (x.kind === "gap" ? "" : x.r.headers.map((hd) => `${hd.name}: ${view(hd.value, "utf8")}`).join("\n")) },
      ],
      rows,
      { empty: "No records in this range.", rowClass: (x) => (x.kind === "gap" ? "gap" : "record") },
    ));
  }

  const span = (g) => (g.first === g.last ? String(g.first) : `${g.first}–${g.last}`);
  const gapText = (g) => `${g.last - g.first + 1} offset(s) removed by compaction`;

  async function tick() {
    if (!tailing) return;
    try { await load(false); } catch (err) { flash(`Tail: ${describe(err)}`, "error"); }
    timer = setTimeout(tick, 1000);
  }

  tailButton.onclick = async () => {
    tailing = !tailing;
    tailButton.textContent = tailing ? "Pause" : "Live tail";
    tailButton.classList.toggle("primary", tailing);
    if (tailing) {
      if (!cursor) { start.value = "end"; await load(true); }
      timer = setTimeout(tick, 1000);
    } else {
      clearTimeout(timer);
    }
  };
  moreButton.onclick = () => load(false).catch((err) => flash(describe(err), "error"));
  mode.onchange = draw;

  const form = h("form", { class: "toolbar", id: "browse-form", onsubmit: async (e) => {
    e.preventDefault();
    try { await load(true); } catch (err) { flash(`Browse failed: ${describe(err)}`, "error"); }
  } },
  h("label", {}, "Partition", partition), h("label", {}, "Start", start), h("label", {}, "Offset", offset),
  h("label", {}, "Timestamp (UTC)", stamp), h("label", {}, "Key filter", keyFilter), h("label", {}, "Value filter", valueFilter),
  h("label", {}, "Limit", limit), h("label", {}, "View", mode),
  h("button", { type: "submit", class: "primary", id: "browse-go" }, "Browse"), moreButton, tailButton);
  main.append(form, status, results, produceForm(topic));
  await load(true).catch((err) => flash(`Browse failed: ${describe(err)}`, "error"));
  return () => { tailing = false; clearTimeout(timer); };
}

function produceForm(topic) {
  const enc = encodeURIComponent(topic.name);
  const key = h("input", { id: "produce-key", placeholder: "key (empty: null)" });
  const value = h("textarea", { id: "produce-value", rows: 3, placeholder: "value" });
  const format = h("select", { id: "produce-format" }, h("option", { value: "utf8" }, "UTF-8 text / JSON"),
    h("option", { value: "hex" }, "hex bytes"), h("option", { value: "base64" }, "base64 bytes"));
  const headers = h("input", { id: "produce-headers", placeholder: "name=value, …" });
  const partition = h("select", { id: "produce-partition" }, h("option", { value: "" }, "by key"),
    topic.partitions.map((p) => h("option", { value: p.partition }, String(p.partition))));
  const submit = async (e) => {
    e.preventDefault();
    try {
      let record;
      if (format.value === "utf8") {
        record = { key: key.value === "" ? null : key.value, value: value.value };
      } else {
        const bytes = format.value === "hex"
          ? Uint8Array.from((value.value.replace(/\s+/g, "").match(/../g) || []).map((b) => {
            const n = parseInt(b, 16);
            if (Number.isNaN(n)) throw new Error(`"${b}" is not hex`);
            return n;
          }))
          : fromB64(value.value.trim());
        const enc64 = new TextEncoder();
        record = { key: key.value === "" ? null : toB64(enc64.encode(key.value)), value: toB64(bytes) };
      }
      const hs = headers.value.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
        const at = s.indexOf("=");
        const [n, v] = at < 0 ? [s, ""] : [s.slice(0, at), s.slice(at + 1)];
        return { name: n, value: format.value === "utf8" ? v : toB64(new TextEncoder().encode(v)) };
      });
      if (hs.length) record.headers = hs;
      if (partition.value !== "") record.partition = Number(partition.value);
      const body = { records: [record], encoding: format.value === "utf8" ? "utf8" : "base64" };
      const r = await api(`/v1/topics/${enc}/records`, { method: "POST", body });
      const at = r.offsets[0];
      flash(`Produced to partition ${at.partition} at offset ${at.offset}`);
    } catch (err) {
      flash(`Produce failed: ${describe(err)}`, "error");
    }
  };
  return h("details", { id: "produce", open: true }, h("summary", {}, "Produce a record"),
    h("form", { class: "stack", onsubmit: submit },
      h("label", {}, "Key", key), h("label", {}, "Value", value), h("label", {}, "Value format", format),
      h("label", {}, "Headers", headers), h("label", {}, "Partition", partition),
      h("button", { type: "submit", class: "primary", id: "produce-send" }, "Produce")));
}
