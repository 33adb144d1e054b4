// The console: a hash-routed single page over the public HTTP API. Each page module exports
// render(main, params) and may return a function that stops its timers when the page is left.
import { clear, h } from "./dom.js";
import { api } from "./api.js";
import * as overview from "./overview.js";
import * as topics from "./topics.js";
import * as records from "./records.js";
import * as groups from "./groups.js";
import * as compaction from "./compaction.js";
import * as access from "./access.js";
import * as transactions from "./transactions.js";
import * as schemas from "./schemas.js";
import * as lake from "./lake.js";

const ROUTES = [
  [/^#?\/?$/, overview.render, "overview"],
  [/^#\/topics$/, topics.renderList, "topics"],
  [/^#\/topics\/([^/]+)$/, topics.renderTopic, "topics"],
  [/^#\/topics\/([^/]+)\/records$/, records.render, "topics"],
  [/^#\/topics\/([^/]+)\/lake$/, lake.render, "topics"],
  [/^#\/schemas$/, schemas.renderList, "schemas"],
  [/^#\/schemas\/([^/]+)$/, schemas.renderSubject, "schemas"],
  [/^#\/groups$/, groups.renderList, "groups"],
  [/^#\/groups\/([^/]+)$/, groups.renderGroup, "groups"],
  [/^#\/transactions$/, transactions.render, "transactions"],
  [/^#\/compaction$/, compaction.render, "compaction"],
  [/^#\/access$/, access.render, "access"],
];

let stop = null;
let generation = 0;

// Each page renders into a container of its own, which the next navigation detaches: a page whose data
// arrives after the user has moved on (a slow answer) then appends to the detached container, never to
// the page now shown, and its timers are stopped as soon as its render returns.
async function route() {
  if (stop) { stop(); stop = null; }
  const mine = ++generation;
  const main = document.getElementById("main");
  const hash = location.hash || "#/";
  const [path, queryText] = hash.split("?");
  const query = new URLSearchParams(queryText || "");
  for (const [pattern, render, nav] of ROUTES) {
    const m = path.match(pattern);
    if (!m) continue;
    for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === nav);
    const page = h("div", { class: "page" });
    clear(main).append(page);
    const params = m.slice(1).map(decodeURIComponent);
    try {
      const stopper = (await render(page, params, query)) || null;
      if (mine === generation) stop = stopper;
      else if (stopper) stopper();
    } catch (err) {
      clear(page).append(h("p", { class: "bad" }, `Could not load this page: ${err.message || err}`));
    }
    return;
  }
  clear(main).append(h("p", {}, "No such page. ", h("a", { href: "#/" }, "Overview")));
}

async function label() {
  try {
    const c = await api("/v1/cluster");
    document.getElementById("agent-label").textContent =
      `agent ${c.this_agent.node_id} · ${c.this_agent.host}:${c.this_agent.http_port}` +
      (c.this_agent.kafka_port ? ` · Kafka ${c.this_agent.kafka_port}` : "");
  } catch { /* the overview shows the error */ }
}

window.addEventListener("hashchange", route);
label();
route();
