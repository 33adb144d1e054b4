// Topics: the paginated list (with stats), create, and one topic's page: partitions, configs (alter with
// Kafka's names), compaction history and "compact now", add partitions, delete (confirmed). The Records
// and Lake tabs are records.js and lake.js.
import { api, describe } from "./api.js";
import { ago, bytes, clear, confirmAction, flash, h, num, table } from "./dom.js";
import { lineChart } from "./charts.js";
import { tabs } from "./lake.js";

const PAGE = 50;

export async function renderList(main, _params, query) {
  const prefix = query.get("prefix") || "";
  const after = query.get("after") || "";
  main.append(h("h1", {}, "Topics"));
  main.append(createForm());
  const search = h("input", { id: "topic-prefix", placeholder: "name prefix", value: prefix });
  main.append(h("form", { class: "toolbar", onsubmit: (e) => { e.preventDefault(); go({ prefix: search.value }); } },
    h("label", {}, "Filter", search), h("button", { type: "submit" }, "Search")));
  const page = await api("/v1/topics", { query: { detail: "true", limit: PAGE, prefix, after } });
  main.append(table(
    [
      { label: "Topic", cell: (t) => h("a", { href: `#/topics/${encodeURIComponent(t.name)}` }, t.name) },
      { label: "Partitions", cell: (t) => num(t.partitions), num: true },
      { label: "Records", cell: (t) => num(t.records), num: true },
      { label: "Bytes", cell: (t) => bytes(t.bytes), num: true },
      { label: "Cleanup policy", cell: (t) => t.cleanup_policy },
      { label: "Dirty ratio", cell: (t) => (t.cleanup_policy.includes("compact") ? `${(t.dirty_ratio * 100).toFixed(1)}%` : "–"), num: true },
    ],
    page.summaries || [],
    { empty: "No topics yet: create one above." },
  ));
  main.append(h("div", { class: "pager" },
    after ? h("button", { onclick: () => go({ prefix }) }, "First page") : null,
    page.next_after ? h("button", { id: "next-page", onclick: () => go({ prefix, after: page.next_after }) }, "Next page") : null));
}

function go(params) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v));
  location.hash = `#/topics${q.toString() ? `?${q}` : ""}`;
}

function createForm() {
  const name = h("input", { id: "new-topic-name", required: true, placeholder: "orders", pattern: "[a-zA-Z0-9._-]{1,249}" });
  const partitions = h("input", { id: "new-topic-partitions", type: "number", min: 1, value: 1, style: "width:90px" });
  const policy = h("select", { id: "new-topic-policy" }, h("option", { value: "delete" }, "delete"),
    h("option", { value: "compact" }, "compact"), h("option", { value: "compact,delete" }, "compact,delete"));
  const extra = h("input", { id: "new-topic-configs", placeholder: "retention.ms=604800000, …", style: "width:260px" });
  const submit = async (e) => {
    e.preventDefault();
    try {
      const configs = { "cleanup.policy": policy.value, ...parseConfigs(extra.value) };
      await api("/v1/topics", { method: "POST", body: { name: name.value, partitions: Number(partitions.value), configs } });
      flash(`Created topic ${name.value}`);
      location.hash = `#/topics/${encodeURIComponent(name.value)}`;
    } catch (err) {
      flash(`Create failed: ${describe(err)}`, "error");
    }
  };
  return h("details", { id: "create-topic" }, h("summary", {}, "Create a topic"),
    h("form", { class: "toolbar", onsubmit: submit },
      h("label", {}, "Name", name), h("label", {}, "Partitions", partitions), h("label", {}, "cleanup.policy", policy),
      h("label", {}, "Other configs (Kafka names)", extra), h("button", { type: "submit", class: "primary" }, "Create")));
}

function parseConfigs(text) {
  const configs = {};
  for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at < 1) throw new Error(`"${part}" is not name=value`);
    configs[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return configs;
}

export async function renderTopic(main, [name]) {
  const topic = await api(`/v1/topics/${encodeURIComponent(name)}`);
  const enc = encodeURIComponent(name);
  main.append(
    h("h1", {}, "Topic ", h("span", { id: "topic-name" }, topic.name)),
    tabs(topic.name, "tab-overview"),
  );
  const parts = await api(`/v1/topics/${enc}/partitions`, { query: { limit: 1000 } });
  // Kafka transactions: read_committed readers stop at the last stable offset (an open transaction's start).
  const stable = new Map(topic.partitions.map((p) => [p.partition, p.last_stable_offset]));
  main.append(h("h2", {}, "Partitions"), table(
    [
      { label: "Partition", cell: (p) => p.partition, num: true },
      { label: "Log start", cell: (p) => num(p.log_start_offset), num: true },
      { label: "High watermark", cell: (p) => num(p.high_watermark), num: true },
      { label: "Last stable", cell: (p) => num(stable.has(p.partition) ? stable.get(p.partition) : p.high_watermark), num: true },
      { label: "Cleaned to", cell: (p) => num(p.cleaned_offset), num: true },
      { label: "Records", cell: (p) => num(p.records), num: true },
      { label: "Bytes by level", cell: (p) => p.bytes_by_level.map((l) => `L${l.level}: ${bytes(l.bytes)} (${l.files} files)`).join(" · ") || "–" },
      { label: "Dirty", cell: (p) => `${(p.dirty_ratio * 100).toFixed(1)}%`, num: true },
      { label: "Last compaction", cell: (p) => ago(p.last_compaction_ms) },
    ],
    parts.partitions,
  ));
  if (parts.next_after !== null && parts.next_after !== undefined) main.append(h("p", { class: "muted" }, "Showing the first 1,000 partitions."));
  main.append(addPartitions(topic));
  main.append(await compactionSection(topic));
  main.append(configsSection(topic));
  main.append(h("h2", {}, "Danger zone"), h("button", { class: "danger", id: "delete-topic", onclick: async () => {
    if (!(await confirmAction(`Delete topic ${topic.name} and all its records? This cannot be undone.`, topic.name))) return;
    try {
      await api(`/v1/topics/${enc}`, { method: "DELETE" });
      flash(`Deleted topic ${topic.name}`);
      location.hash = "#/topics";
    } catch (err) {
      flash(`Delete failed: ${describe(err)}`, "error");
    }
  } }, "Delete topic"));
}

function addPartitions(topic) {
  const count = h("input", { type: "number", min: topic.partitions.length + 1, value: topic.partitions.length + 1, style: "width:90px", id: "partition-count" });
  return h("form", { class: "toolbar", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api(`/v1/topics/${encodeURIComponent(topic.name)}/partitions`, { method: "POST", body: { partitions: Number(count.value) } });
      flash(`${topic.name} now has ${count.value} partitions`);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (err) { flash(`Could not add partitions: ${describe(err)}`, "error"); }
  } }, h("label", {}, "Partition count (grow only)", count), h("button", { type: "submit" }, "Add partitions"));
}

async function compactionSection(topic) {
  const enc = encodeURIComponent(topic.name);
  const box = h("section", { id: "compaction" }, h("h2", {}, "Compaction"));
  const policy = topic.configs["cleanup.policy"] || "delete";
  const hist = await api(`/v1/topics/${enc}/compaction`);
  box.append(h("p", {}, `cleanup.policy=${policy}; dirty ratio now `, h("strong", { id: "dirty-now" }, `${(hist.dirty_ratio * 100).toFixed(1)}%`), ". ",
    h("button", { id: "compact-now", onclick: async () => {
      try {
        const r = await api(`/v1/topics/${enc}/compact`, { method: "POST" });
        flash(`Planned ${r.planned.length} job(s): see the Compaction page`);
      } catch (err) { flash(`Compaction failed: ${describe(err)}`, "error"); }
    } }, "Compact now")));
  const charts = h("div", { class: "charts" });
  if (hist.history.length > 1) {
    charts.append(lineChart("Dirty ratio (%)", hist.history.map((s) => s.ts_ms), [{ label: "dirty", values: hist.history.map((s) => s.dirty_ratio * 100) }]));
  }
  box.append(charts);
  box.append(h("h3", {}, "Bytes removed by compaction"), table(
    [
      { label: "When", cell: (r) => ago(r.ts_ms) },
      { label: "Job", cell: (r) => r.job_id, num: true },
      { label: "Bytes removed", cell: (r) => bytes(r.bytes_removed), num: true },
      { label: "Records removed", cell: (r) => num(r.records_removed), num: true },
    ],
    hist.removed.slice().reverse().slice(0, 20),
    { empty: "Nothing removed yet." },
  ));
  return box;
}

function configsSection(topic) {
  const enc = encodeURIComponent(topic.name);
  const rows = Object.entries(topic.configs).sort(([a], [b]) => a.localeCompare(b));
  const box = h("section", { id: "configs" }, h("h2", {}, "Configs"));
  const name = h("input", { id: "config-name", placeholder: "retention.ms", list: "config-names" });
  const value = h("input", { id: "config-value", placeholder: "value (empty: back to default)" });
  box.append(h("datalist", { id: "config-names" }, rows.map(([k]) => h("option", { value: k }))));
  box.append(h("form", { class: "toolbar", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const change = { [name.value]: value.value === "" ? null : value.value };
      await api(`/v1/topics/${enc}/configs`, { method: "PATCH", body: { configs: change } });
      flash(`Set ${name.value} on ${topic.name}`);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (err) { flash(`Alter failed: ${describe(err)}`, "error"); }
  } }, h("label", {}, "Config", name), h("label", {}, "Value", value), h("button", { type: "submit", id: "config-save" }, "Alter config")));
  box.append(table([{ label: "Name", cell: ([k]) => k }, { label: "Value", cell: ([, v]) => v, cls: "data" }], rows));
  return box;
}
