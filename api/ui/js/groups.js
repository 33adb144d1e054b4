// Consumer groups: the list; one group's state, members and their assignments, committed offsets and
// lag per partition; and resetting offsets (as kafka-consumer-groups --reset-offsets), confirmed, for a
// group with no active members.
import { api, describe } from "./api.js";
import { confirmAction, flash, h, num, pill, table } from "./dom.js";

export async function renderList(main, _params, query) {
  const after = query.get("after") || "";
  const prefix = query.get("prefix") || "";
  main.append(h("h1", {}, "Consumer groups"));
  const search = h("input", { id: "group-prefix", placeholder: "group id prefix", value: prefix });
  main.append(h("form", { class: "toolbar", onsubmit: (e) => { e.preventDefault(); location.hash = `#/groups?prefix=${encodeURIComponent(search.value)}`; } },
    h("label", {}, "Filter", search), h("button", { type: "submit" }, "Search")));
  const page = await api("/v1/groups", { query: { limit: 100, after, prefix } });
  main.append(table(
    [
      { label: "Group", cell: (g) => h("a", { href: `#/groups/${encodeURIComponent(g.group)}` }, g.group) },
      { label: "State", cell: (g) => pill(g.state) },
      { label: "Protocol", cell: (g) => [g.protocol_type, g.protocol].filter(Boolean).join(" / ") || "–" },
      { label: "Members", cell: (g) => num(g.members), num: true },
    ],
    page.groups,
    { empty: "No consumer groups yet." },
  ));
  if (page.next_after) {
    main.append(h("div", { class: "pager" }, h("a", { href: `#/groups?prefix=${encodeURIComponent(prefix)}&after=${encodeURIComponent(page.next_after)}` }, "Next page")));
  }
}

export async function renderGroup(main, [gid]) {
  const enc = encodeURIComponent(gid);
  const box = h("div", { id: "group" });
  main.append(h("h1", {}, "Group ", h("span", { id: "group-id" }, gid)), box);
  let timer = null;
  const draw = async () => {
    let g;
    try { g = await api(`/v1/groups/${enc}`); } catch (err) {
      box.replaceChildren(h("p", { class: "bad" }, describe(err)));
      return;
    }
    box.replaceChildren(
      h("div", { class: "cards" },
        h("div", { class: "card" }, h("div", { class: "label" }, "State"), h("div", { class: "value", id: "group-state" }, g.state)),
        h("div", { class: "card" }, h("div", { class: "label" }, "Members"), h("div", { class: "value" }, num(g.members.length))),
        h("div", { class: "card" }, h("div", { class: "label" }, "Total lag"), h("div", { class: "value", id: "total-lag" }, num(g.total_lag))),
        h("div", { class: "card" }, h("div", { class: "label" }, "Generation"), h("div", { class: "value" }, num(g.generation)))),
      h("h2", {}, "Members"),
      table(
        [
          { label: "Member", cell: (m) => m.member_id, cls: "data" },
          { label: "Client", cell: (m) => m.client_id },
          { label: "Host", cell: (m) => m.client_host },
          { label: "Assignment", cell: (m) => m.assignment.map((a) => `${a.topic}: ${a.partitions.join(", ")}`).join("\n") || "–", cls: "data" },
        ],
        g.members,
        { empty: "No active members." },
      ),
      h("h2", {}, "Offsets and lag"),
      table(
        [
          { label: "Topic", cell: (p) => h("a", { href: `#/topics/${encodeURIComponent(p.topic)}` }, p.topic) },
          { label: "Partition", cell: (p) => p.partition, num: true },
          { label: "Committed", cell: (p) => num(p.committed_offset), num: true },
          { label: "Log start", cell: (p) => num(p.log_start_offset), num: true },
          { label: "High watermark", cell: (p) => num(p.high_watermark), num: true },
          { label: "Lag", cell: (p) => num(p.lag), num: true },
        ],
        g.partitions,
        { empty: "No committed offsets." },
      ),
      resetForm(gid, g),
    );
  };
  const loop = async () => { await draw(); timer = setTimeout(loop, 2000); };
  await loop();
  return () => clearTimeout(timer);
}

function resetForm(gid, g) {
  const topics = [...new Set(g.partitions.map((p) => p.topic))];
  const topic = h("input", { id: "reset-topic", list: "reset-topics", value: topics[0] || "" });
  const to = h("select", { id: "reset-to" }, ["earliest", "latest", "timestamp", "offset"].map((s) => h("option", { value: s }, s)));
  const at = h("input", { id: "reset-value", placeholder: "offset, or ms since epoch" });
  const partitions = h("input", { id: "reset-partitions", placeholder: "all, or 0,2,5" });
  const active = g.members.length > 0;
  const body = () => {
    const b = { topic: topic.value, to: to.value, partitions: null };
    if (partitions.value.trim()) b.partitions = partitions.value.split(",").map((s) => Number(s.trim()));
    if (to.value === "timestamp") b.timestamp = Number(at.value);
    if (to.value === "offset") b.offset = Number(at.value);
    return b;
  };
  const submit = async (e) => {
    e.preventDefault();
    try {
      const plan = await api(`/v1/groups/${encodeURIComponent(gid)}/offsets/reset`, { method: "POST", body: { ...body(), dry_run: true } });
      const lines = plan.offsets.map((o) => `${o.topic}/${o.partition} → ${o.offset}`).join(", ");
      if (!(await confirmAction(`Reset ${gid}'s offsets: ${lines}?`))) return;
      await api(`/v1/groups/${encodeURIComponent(gid)}/offsets/reset`, { method: "POST", body: body() });
      flash(`Offsets of ${gid} reset`);
    } catch (err) {
      flash(`Reset failed: ${describe(err)}`, "error");
    }
  };
  return h("section", { id: "reset" }, h("h2", {}, "Reset offsets"),
    active ? h("p", { class: "warn" }, "The group has active members: Kafka refuses a reset until they leave.") : null,
    h("datalist", { id: "reset-topics" }, topics.map((t) => h("option", { value: t }))),
    h("form", { class: "toolbar", onsubmit: submit },
      h("label", {}, "Topic", topic), h("label", {}, "Partitions", partitions), h("label", {}, "To", to), h("label", {}, "Offset / timestamp", at),
      h("button", { type: "submit", class: "danger", id: "reset-go" }, "Reset offsets…")));
}
