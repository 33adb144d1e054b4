// DOM helpers. Invariant: data from the API is only ever put into the page as text (textContent, or a
// text node): never through innerHTML, so a record holding "<script>" is shown, not run.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name === "value") el.value = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function table(columns, rows, { empty = "Nothing here yet.", rowClass } = {}) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : "" }, c.label)));
  const body = rows.length
    ? rows.map((row) => h("tr", { class: rowClass ? rowClass(row) : "" },
        columns.map((c) => h("td", { class: c.num ? "num" : (c.cls || "") }, c.cell(row)))))
    : [h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, empty))];
  return h("table", {}, h("thead", {}, head), h("tbody", {}, body));
}

export function card(label, value, sub, id) {
  return h("div", { class: "card", id }, h("div", { class: "label" }, label),
    h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
export function bytes(n) {
  if (n === null || n === undefined) return "–";
  let i = 0;
  while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${UNITS[i]}`;
}

export function num(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

export function time(ms) {
  if (ms === null || ms === undefined) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

export function ago(ms) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return `${(s / 3600).toFixed(1)} h ago`;
}

export function pill(text) {
  return h("span", { class: `pill ${text}` }, text);
}

export function flash(text, kind = "info") {
  const box = document.getElementById("flash");
  const msg = h("div", { class: `msg ${kind}`, "data-kind": kind }, text);
  box.append(msg);
  setTimeout(() => msg.remove(), kind === "error" ? 9000 : 4000);
}

// A confirmation dialog. With `typed`, the user must type that text (a topic's name) to confirm.
export function confirmAction(text, typed = null) {
  const dialog = document.getElementById("confirm");
  const input = document.getElementById("confirm-typed");
  const ok = document.getElementById("confirm-ok");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-typed-label").hidden = !typed;
  document.getElementById("confirm-expected").textContent = typed || "";
  input.value = "";
  ok.disabled = Boolean(typed);
  input.oninput = () => { ok.disabled = input.value !== typed; };
  return new Promise((resolve) => {
    dialog.onclose = () => resolve(dialog.returnValue === "ok" && (!typed || input.value === typed));
    dialog.showModal();
  });
}
