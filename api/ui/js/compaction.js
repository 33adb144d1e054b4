// Compaction jobs: pending, running, done and failed, newest first, with their stats lines; paginated.
import { api } from "./api.js";
import { ago, h, num, pill, table } from "./dom.js";

export async function render(main, _params, query) {
  const state = query.get("state") || "";
  const topic = query.get("topic") || "";
  const before = query.get("before") || "";
  main.append(h("h1", {}, "Compaction"));
  const stateSel = h("select", { id: "job-state" }, ["", "pending", "running", "done", "failed"].map((s) => h("option", { value: s, selected: s === state }, s || "all")));
  const topicIn = h("input", { id: "job-topic", placeholder: "topic", value: topic });
  main.append(h("form", { class: "toolbar", onsubmit: (e) => {
    e.preventDefault();
    location.hash = `#/compaction?${new URLSearchParams({ state: stateSel.value, topic: topicIn.value })}`;
  } }, h("label", {}, "State", stateSel), h("label", {}, "Topic", topicIn), h("button", { type: "submit" }, "Show")));
  const page = await api("/v1/compaction/jobs", { query: { state, topic, before, limit: 50 } });
  main.append(table(
    [
      { label: "Job", cell: (j) => j.job_id, num: true },
      { label: "Kind", cell: (j) => j.kind },
      { label: "State", cell: (j) => pill(j.state) },
      { label: "Topics", cell: (j) => j.topics.join(", ") },
      { label: "Inputs", cell: (j) => `${num(j.input_files)} files`, num: true },
      { label: "Attempts", cell: (j) => j.attempts, num: true },
      { label: "Updated", cell: (j) => ago(j.updated_ms) },
      { label: "Stats", cell: (j) => j.stats_line || "", cls: "data" },
    ],
    page.jobs,
    { empty: "No compaction jobs yet." },
  ));
  const timer = setTimeout(() => window.dispatchEvent(new HashChangeEvent("hashchange")), 5000);
  if (page.next_before) {
    main.append(h("div", { class: "pager" }, h("a", { href: `#/compaction?${new URLSearchParams({ state, topic, before: page.next_before })}` }, "Older jobs")));
  }
  return () => clearTimeout(timer);
}
