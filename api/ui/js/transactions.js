// Kafka transactions: the transactional ids and their open transactions' partitions, the hanging ones
// (open past their timeout, holding read_committed readers at their first offset), and aborting one, as
// kafka-transactions --abort does (the producer is fenced), confirmed.
import { api, describe } from "./api.js";
import { ago, confirmAction, flash, h, num, pill, table } from "./dom.js";

export async function render(main, _params, query) {
  const open = query.get("all") !== "1";
  main.append(h("h1", {}, "Transactions"),
    h("p", { class: "muted" }, open ? "Open transactions. " : "Every transactional id. ",
      h("a", { href: open ? "#/transactions?all=1" : "#/transactions" }, open ? "Show every transactional id" : "Show open ones only")));
  const box = h("div", { id: "transactions" });
  main.append(box);
  let timer = null;
  const draw = async () => {
    let page;
    try { page = await api("/v1/transactions", { query: { state: open ? "Ongoing" : null } }); } catch (err) {
      box.replaceChildren(h("p", { class: "bad" }, describe(err)));
      return;
    }
    box.replaceChildren(table(
      [
        { label: "Transactional id", cell: (t) => t.transactional_id, cls: "data" },
        { label: "State", cell: (t) => pill(t.hanging ? "Hanging" : t.state) },
        { label: "Producer", cell: (t) => `${t.producer_id} / epoch ${t.producer_epoch}`, cls: "data" },
        { label: "Began", cell: (t) => (t.started_ms ? ago(t.started_ms) : "–") },
        { label: "Timeout", cell: (t) => `${num(t.timeout_ms / 1000)} s`, num: true },
        { label: "Partitions (first offset)", cell: (t) => t.partitions.map((p) => `${p.topic}/${p.partition} @ ${p.first_offset ?? "–"}`).join("\n") || "–", cls: "data" },
        { label: "Groups", cell: (t) => t.groups.join(", ") || "–" },
        { label: "", cell: (t) => (t.state === "Ongoing" ? abortButton(t, draw) : "") },
      ],
      page.transactions,
      { empty: open ? "No transaction is open." : "No transactional id yet.", rowClass: (t) => (t.hanging ? "bad" : "") },
    ));
  };
  await draw();
  timer = setInterval(draw, 2000);
  return () => clearInterval(timer);
}

function abortButton(t, redraw) {
  return h("button", { class: "danger", "data-txn": t.transactional_id, onclick: async () => {
    const ok = await confirmAction(`Abort the open transaction of ${t.transactional_id}? Its producer is fenced and must initialise again.`, t.transactional_id);
    if (!ok) return;
    try {
      await api(`/v1/transactions/${encodeURIComponent(t.transactional_id)}/abort`, { method: "POST" });
      flash(`Aborted the transaction of ${t.transactional_id}.`);
    } catch (err) {
      flash(describe(err), "error");
    }
    await redraw();
  } }, "Abort");
}
