// A topic's Lake tab: its Apache Iceberg table as GET /v1/topics/{topic}/lake shows it (mode, table, lag in
// offsets and seconds, last commit, last run and its error, what its tables hold and the requests the lake
// sent for them, each partition's committed offset and lag), and
// "Commit now" (POST .../lake/commit-now, which needs ALTER on the topic: a refusal is shown, not hidden).
// The page refreshes itself every 5 s while it is open.
import { api, describe } from "./api.js";
import { ago, bytes, card, flash, h, num, table, time } from "./dom.js";

export function tabs(name, active) {
  const enc = encodeURIComponent(name);
  const tab = (id, href, label) => h("a", { id, href, class: active === id ? "active" : "" }, label);
  return h("div", { class: "tabs" },
    tab("tab-overview", `#/topics/${enc}`, "Overview"),
    tab("tab-records", `#/topics/${enc}/records`, "Records"),
    tab("tab-lake", `#/topics/${enc}/lake`, "Lake"));
}

function seconds(s) {
  if (s === 0) return "0 s";
  if (s < 90) return `${s.toFixed(1)} s`;
  if (s < 5400) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

export async function render(main, [name]) {
  const enc = encodeURIComponent(name);
  main.append(h("h1", {}, "Topic ", h("span", { id: "topic-name" }, name)), tabs(name, "tab-lake"));
  const status = await api(`/v1/topics/${enc}/lake`);
  if (status.mode === "disabled") {
    main.append(h("p", { id: "lake-disabled" }, "This topic is not kept as an Iceberg table. Set ",
      h("code", {}, "strata.iceberg.mode=raw"), " in its configs (Overview tab) to turn the lake on."));
    return null;
  }
  const commitNow = h("button", { id: "lake-commit-now", class: "primary", onclick: async () => {
    try {
      await api(`/v1/topics/${enc}/lake/commit-now`, { method: "POST" });
      flash(`Commit of ${status.table} asked for: the next lake round commits it`);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (err) {
      flash(`Commit now failed: ${describe(err)}`, "error");
      main.append(h("p", { class: "bad", id: "lake-commit-error" }, `Commit now failed: ${describe(err)}`));
    }
  } }, "Commit now");
  main.append(h("div", { class: "cards" },
    card("Table", h("span", { id: "lake-table", style: "font-size:16px;word-break:break-all" }, status.table), `mode ${status.mode}`, "card-lake-table"),
    card("Lag", h("span", { id: "lake-lag" }, `${num(status.lag_records)} offsets`),
      `oldest missing record ${seconds(status.lag_seconds)} old`, "card-lake-lag"),
    card("Last commit", h("span", { id: "lake-last-commit" }, ago(status.last_commit_ms)),
      status.last_snapshot_id ? `snapshot ${status.last_snapshot_id}` : "no snapshot yet", "card-lake-commit"),
    card("Commit interval", `${num(status.commit_interval_ms / 1000)} s`,
      status.commit_requested ? h("span", { id: "lake-requested" }, "a commit is asked for") : "no commit asked for",
      "card-lake-interval"),
    card("Stored", h("span", { id: "lake-stored" }, status.stored ? bytes(status.stored.bytes) : "not listed yet"),
      status.stored ? `${num(status.stored.files)} files, listed ${ago(status.stored.measured_ms)}`
        : "listed after the first commit", "card-lake-stored"),
    card("Requests", h("span", { id: "lake-requests" }, `${num(status.requests.put)} PUT · ${num(status.requests.get)} GET`),
      `${num(status.requests.head)} HEAD, ${num(status.requests.list)} LIST, ${num(status.requests.delete)} DELETE, since the lake was turned on`,
      "card-lake-requests")));
  const run = status.last_run;
  main.append(h("p", { id: "lake-last-run" }, run
    ? `Last run ${time(run.at_ms)} UTC, leaving ${num(run.lag_records)} offsets behind${status.writing ? "; a writer is running now" : ""}.`
    : "The writer has not run yet."));
  main.append(status.last_error
    ? h("p", { class: "bad", id: "lake-error" }, `Last error: ${status.last_error}`)
    : h("p", { class: "ok", id: "lake-error" }, "No error."));
  main.append(h("p", {}, commitNow));
  main.append(h("h2", {}, "Partitions"), table(
    [
      { label: "Partition", cell: (p) => p.partition, num: true },
      { label: "Committed to", cell: (p) => num(p.committed_offset), num: true },
      { label: "Last stable", cell: (p) => num(p.last_stable_offset), num: true },
      { label: "Lag (offsets)", cell: (p) => num(p.lag_records), num: true },
      { label: "Lag (time)", cell: (p) => seconds(p.lag_seconds), num: true },
    ],
    status.partitions,
    { empty: "No partitions." },
  ));
  const timer = setTimeout(() => window.dispatchEvent(new HashChangeEvent("hashchange")), 5000);
  return () => clearTimeout(timer);
}
