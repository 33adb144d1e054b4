// Overview: agents, topics, this agent's throughput and produce latency, object-store requests and their
// monthly cost (flush PUTs by flush class too), what the lake adds across the cluster (its tables' requests
// and stored bytes, and their cost), and the metadata store's health. Refreshed every sampling interval.
import { api, describe } from "./api.js";
import { append, bytes, card, clear, h, num, table } from "./dom.js";
import { lineChart } from "./charts.js";

export async function render(main) {
  main.append(h("h1", {}, "Overview"));
  const body = h("div", { id: "overview" });
  main.append(body);
  let timer = null;
  const refresh = async () => {
    try {
      const [cluster, history] = await Promise.all([api("/v1/cluster"), api("/v1/metrics/history")]);
      draw(body, cluster, history);
      timer = setTimeout(refresh, Math.max(2000, history.interval_ms));
    } catch (err) {
      clear(body).append(h("p", { class: "bad" }, `Cannot reach the agent: ${describe(err)}`));
      timer = setTimeout(refresh, 5000);
    }
  };
  await refresh();
  return () => clearTimeout(timer);
}

function last(points, field) {
  for (let i = points.length - 1; i >= 0; i--) if (points[i][field] !== null) return points[i][field];
  return null;
}

function span(seconds) {
  return seconds < 120 ? `${Math.round(seconds)} s` : `${Math.round(seconds / 60)} min`;
}

function fixed(v, digits = 2) {
  return v === null || v === undefined ? "–" : v.toFixed(digits);
}

// What the low-latency class costs: on S3 each of its flushes is a PUT that the standard class would have
// batched with more records; on a local directory a flush costs no request.
function flushClassNote(kind, lowLatencyCost) {
  if (kind !== "s3") return "a local directory: flushes cost no request";
  return `low-latency topics: $${lowLatencyCost.toFixed(2)}/month of PUTs (they flush more often than standard ones)`;
}

// The lake's card: its requests' cost (the mean of the recent points that have a rate) plus what storing
// its tables costs, as of the latest point that read the lake's figures. Cluster-wide: every worker's.
function lakeCard(recent, points, prices) {
  const lake = points.map((p) => p.lake).filter((l) => l !== null && l !== undefined);
  if (!lake.length) {
    return card("Lake (all workers)", "–", points.length ? "the lake's figures could not be read" : "no sample yet", "card-lake");
  }
  const now = lake[lake.length - 1];
  const rated = recent.map((p) => p.lake).filter((l) => l && l.monthly_cost_usd !== null);
  const mean = (f) => (rated.length ? rated.reduce((s, l) => s + l[f], 0) / rated.length : 0);
  const total = mean("monthly_cost_usd") + now.storage_monthly_usd;
  return card("Lake (all workers)", h("span", { id: "lake-cost" }, `$${total.toFixed(2)}/month`),
    h("span", { id: "lake-usage" },
      `${fixed(mean("puts_per_s"))} PUT/s · ${fixed(mean("gets_per_s"))} GET/s · `
      + `${bytes(now.stored_bytes)} in ${num(now.stored_objects)} files `
      + `($${now.storage_monthly_usd.toFixed(2)}/month at $${prices.storage_per_gb_month}/GiB)`),
    "card-lake");
}

function draw(body, cluster, history) {
  const points = history.points;
  const meta = cluster.metadata;
  const recent = points.slice(-12);  // the last minute at the default 5 s interval
  const mean = (f) => (recent.length ? recent.reduce((s, p) => s + p[f], 0) / recent.length : 0);
  const cost = mean("monthly_cost_usd");
  const byClass = (field, cls) =>
    recent.length ? recent.reduce((s, p) => s + (p[field][cls] || 0), 0) / recent.length : 0;
  const classes = ["standard", "low-latency"];
  clear(body).append(
    h("div", { class: "cards" },
      card("Agents", num(cluster.agents.length), cluster.cluster_mode ? "cluster view" : "this agent only", "card-agents"),
      card("Topics", num(cluster.topics), h("a", { href: "#/topics" }, "browse topics"), "card-topics"),
      card("Produce", `${fixed(last(points, "produce_mib_s"))} MiB/s`, `fetch ${fixed(last(points, "fetch_mib_s"))} MiB/s`, "card-throughput"),
      card("Produce latency", `${fixed(last(points, "produce_p99_ms"), 0)} ms`, `p99; p50 ${fixed(last(points, "produce_p50_ms"), 0)} ms`, "card-latency"),
      card("Object store", `${fixed(mean("puts_per_s"))} PUT/s`, `${fixed(mean("gets_per_s"))} GET/s · ${cluster.object_store.kind}`, "card-requests"),
      card("Request cost", `$${cost.toFixed(2)}/month`,
        `at $${history.prices.put_per_1000}/1k PUT, $${history.prices.get_per_1000}/1k GET`, "card-cost"),
      card("Flush PUTs by class",
        classes.map((c) => `${c} ${fixed(byClass("flush_puts_per_s", c))}/s`).join(" · "),
        flushClassNote(cluster.object_store.kind, byClass("flush_monthly_cost_usd", "low-latency")), "card-classes"),
      lakeCard(recent, points, history.prices),
      card("Metadata store", meta.ok ? "healthy" : "down",
        meta.ok ? `${meta.backend} · ${meta.latency_ms} ms` : `${meta.backend}: ${meta.message} (${meta.error_code})`, "card-metadata"),
    ),
  );
  body.querySelector("#card-metadata .value").className = `value ${meta.ok ? "ok" : "bad"}`;
  const times = points.map((p) => p.ts_ms);
  const series = (fields) => fields.map(([label, f]) => ({ label, values: points.map((p) => p[f]) }));
  const lakeSeries = (fields) => fields.map(([label, f]) => ({ label, values: points.map((p) => (p.lake ? p.lake[f] : null)) }));
  append(body, [
    h("h2", {}, `This agent and the lake, last ${span((points.length * history.interval_ms) / 1000)}`),
    points.length < 2 ? h("p", { class: "muted" }, "Charts fill in as the agent samples its metrics.") : null,
    points.length < 2 ? null : h("div", { class: "charts" },
      lineChart("Throughput (MiB/s)", times, series([["produce", "produce_mib_s"], ["fetch", "fetch_mib_s"]])),
      lineChart("Produce latency (ms)", times, series([["p50", "produce_p50_ms"], ["p99", "produce_p99_ms"]])),
      lineChart("Object-store requests (/s)", times, series([["PUT", "puts_per_s"], ["GET", "gets_per_s"]])),
      lineChart("Request cost (USD/month)", times, [...series([["this agent", "monthly_cost_usd"]]),
        ...lakeSeries([["lake requests", "monthly_cost_usd"], ["lake storage", "storage_monthly_usd"]])]),
      lineChart("Lake requests, all workers (/s)", times, lakeSeries([["PUT", "puts_per_s"], ["GET", "gets_per_s"]])),
      lineChart("Flush PUTs by class (/s)", times, classes.map((c) => ({ label: c, values: points.map((p) => p.flush_puts_per_s[c] || 0) }))),
    ),
    h("h2", {}, "Agents"),
    table(
      [
        { label: "Node id", cell: (a) => a.node_id, num: true },
        { label: "Host", cell: (a) => a.host },
        { label: "Kafka port", cell: (a) => (a.port >= 0 ? a.port : "–"), num: true },
        { label: "", cell: (a) => (a.node_id === cluster.this_agent.node_id && a.host === cluster.this_agent.host ? "this agent" : "") },
      ],
      cluster.agents,
    ),
    h("p", { class: "muted" }, `Object store: ${cluster.object_store.bucket}`),
  ]);
}
