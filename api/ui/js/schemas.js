// Schemas: the schema registry's subjects, each with its latest version, type, compatibility level and mode;
// a subject's versions, the schema text of one, a line diff between two; the level and mode (view and
// change, the subject's own or the global one); register a version after a compatibility check; soft and
// permanent deletes of a version or a subject. Everything goes through the registry's own API (Confluent's,
// under /schema-registry), so each action is allowed or refused by the same permissions as for any client;
// a refusal (403) is shown as such, never as a broken page.
import { ApiError, describe, registry } from "./api.js";
import { confirmAction, flash, h, num, pill, table } from "./dom.js";
import { diffView, pretty } from "./schema_diff.js";
import { registerForm } from "./schema_register.js";

const PAGE = 50;
export const LEVELS = ["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"];
export const MODES = ["READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"];
const enc = encodeURIComponent;

export function subjectHref(subject, query = {}) {
  const q = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== null && v !== undefined && v !== ""));
  return `#/schemas/${enc(subject)}${q.toString() ? `?${q}` : ""}`;
}

function refusedBox(err, what) {
  const denied = err instanceof ApiError && err.status === 403;
  return h("p", { class: "bad", id: denied ? "schemas-forbidden" : "schemas-error" },
    denied ? `You may not ${what}. ${describe(err)}` : `Could not ${what}: ${describe(err)}`);
}

// A level or mode: the subject's own, or the global one it inherits (404 40408 / 40409: none of its own).
async function own(path, key, missing) {
  try {
    return { value: (await registry(path))[key], own: true };
  } catch (err) {
    if (err instanceof ApiError && err.code === missing) return { value: null, own: false };
    return { value: null, own: false, error: err };
  }
}

async function globals() {
  const get = async (path, key) => {
    try { return (await registry(path))[key]; } catch (err) { return err; }
  };
  const [level, mode] = await Promise.all([get("/config", "compatibilityLevel"), get("/mode", "mode")]);
  return { level, mode };
}

function shown(setting, global) {
  if (setting.error) return h("span", { class: "muted", title: describe(setting.error) }, "–");
  if (setting.own) return setting.value;
  return h("span", { class: "muted" }, global instanceof Error ? "global" : `${global} (global)`);
}

export async function renderList(main, _params, query) {
  const prefix = query.get("prefix") || "";
  const deleted = query.get("deleted") === "1";
  const offset = Number(query.get("offset") || 0);
  main.append(h("h1", {}, "Schemas"));
  const g = await globals();
  main.append(globalSettings(g));
  const search = h("input", { id: "subject-prefix", placeholder: "subject prefix", value: prefix });
  const showDeleted = h("input", { type: "checkbox", id: "show-deleted", checked: deleted });
  main.append(h("form", { class: "toolbar", onsubmit: (e) => { e.preventDefault(); go({ prefix: search.value, deleted: showDeleted.checked ? "1" : "" }); } },
    h("label", {}, "Filter", search), h("label", {}, "Soft-deleted too", showDeleted), h("button", { type: "submit" }, "Search")));
  const box = h("div", { id: "subjects" });
  main.append(box);
  main.append(registerForm(null, null, (subject) => goTo(subjectHref(subject))));
  let names;
  try {
    names = await registry("/subjects", { query: { subjectPrefix: prefix, deleted: deleted || null, offset, limit: PAGE + 1 } });
  } catch (err) {
    box.append(refusedBox(err, "list the subjects"));
    return;
  }
  const page = names.slice(0, PAGE);
  const rows = await subjectRows(page, prefix, deleted, offset);
  box.append(table(
    [
      { label: "Subject", cell: (r) => h("a", { href: subjectHref(r.subject) }, r.subject) },
      { label: "Latest version", cell: (r) => (r.latest ? [String(r.latest.version), r.latest.deleted ? " " : "", r.latest.deleted ? pill("soft-deleted") : ""] : "–"), num: true },
      { label: "Id", cell: (r) => (r.latest ? String(r.latest.id) : "–"), num: true },
      { label: "Type", cell: (r) => (r.latest ? r.latest.schemaType || "AVRO" : "–") },
      { label: "Compatibility", cell: (r) => shown(r.level, g.level) },
      { label: "Mode", cell: (r) => shown(r.mode, g.mode) },
    ],
    rows,
    { empty: prefix ? "No subject starts with this prefix." : "No subjects yet: register a schema below, or let a serializer register one." },
  ));
  box.append(h("div", { class: "pager" },
    offset > 0 ? h("button", { onclick: () => go({ prefix, deleted: deleted ? "1" : "", offset: Math.max(0, offset - PAGE) }) }, "Previous page") : null,
    names.length > PAGE ? h("button", { id: "next-subjects", onclick: () => go({ prefix, deleted: deleted ? "1" : "", offset: offset + PAGE }) }, "Next page") : null));
}

// The page's subjects with their latest version (one GET /schemas?latestOnly for the page, by name; a
// subject it left out is asked for alone) and their own level and mode.
async function subjectRows(page, prefix, deleted, offset) {
  let latest = [];
  try {
    latest = await registry("/schemas", { query: { subjectPrefix: prefix, deleted: deleted || null, latestOnly: true, offset, limit: PAGE } });
  } catch { latest = []; }
  const bySubject = new Map(latest.map((v) => [v.subject, v]));
  return Promise.all(page.map(async (subject) => {
    let version = bySubject.get(subject) || null;
    if (!version) {
      try { version = await registry(`/subjects/${enc(subject)}/versions/latest`, { query: { deleted: deleted || null } }); } catch { version = null; }
    }
    const [level, mode] = await Promise.all([
      own(`/config/${enc(subject)}`, "compatibilityLevel", 40408),
      own(`/mode/${enc(subject)}`, "mode", 40409),
    ]);
    return { subject, latest: version, level, mode };
  }));
}

function go(params) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined && v !== 0));
  location.hash = `#/schemas${q.toString() ? `?${q}` : ""}`;
}

// The global level and mode, with a form to change each for a principal who may (ALTER_CONFIGS on the
// cluster); the registry refuses anyone else, and the page says so.
function globalSettings(g) {
  const text = (v) => (v instanceof Error ? (v.status === 403 ? "not allowed to see" : describe(v)) : v);
  return h("p", { id: "global-settings" }, "Global compatibility ", h("strong", { id: "global-level" }, text(g.level)),
    " · mode ", h("strong", { id: "global-mode" }, text(g.mode)), " · ",
    h("a", { href: "#/schemas/:global" }, "change"));
}

export async function renderSubject(main, [subject], query) {
  if (subject === ":global") return renderGlobal(main);
  const path = `/subjects/${enc(subject)}`;
  main.append(h("h1", {}, "Subject ", h("span", { id: "subject-name" }, subject)),
    h("p", {}, h("a", { href: "#/schemas" }, "← every subject")));
  let numbers;
  try {
    numbers = await registry(`${path}/versions`, { query: { deleted: true } });
  } catch (err) {
    if (err instanceof ApiError && err.code === 40401) {
      main.append(h("p", { class: "muted", id: "no-versions" }, "This subject has no versions (yet): register one below."));
      main.append(settingsSection(subject, await subjectSettings(subject)));
      main.append(registerForm(subject, null, () => goTo(subjectHref(subject))));
      return;
    }
    main.append(refusedBox(err, `read subject ${subject}`));
    return;
  }
  const versions = await Promise.all(numbers.map((v) => registry(`${path}/versions/${v}`, { query: { deleted: true } })));
  const live = versions.filter((v) => !v.deleted);
  const latest = live.length ? live[live.length - 1] : versions[versions.length - 1];
  const chosen = versions.find((v) => String(v.version) === query.get("v")) || latest;
  const settings = await subjectSettings(subject);
  main.append(versionsSection(subject, versions, chosen));
  main.append(h("section", { id: "schema-text" }, h("h2", {}, `Version ${chosen.version}`, chosen.deleted ? " (soft-deleted)" : ""),
    h("p", { class: "muted" }, `id ${chosen.id} · ${chosen.schemaType || "AVRO"}`,
      (chosen.references || []).length ? ` · references ${chosen.references.map((r) => `${r.name} → ${r.subject} v${r.version}`).join(", ")}` : ""),
    h("pre", { class: "schema", id: "schema-body" }, pretty(chosen.schema, chosen.schemaType))));
  main.append(diffSection(subject, versions, query));
  main.append(settingsSection(subject, settings));
  main.append(registerForm(subject, latest, () => goTo(subjectHref(subject))));
  main.append(dangerZone(subject, live.length === 0));
}

function reload() {
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

// To `hash`, or the same page again: exactly one render either way.
function goTo(hash) {
  if (location.hash === hash) reload();
  else location.hash = hash;
}

async function subjectSettings(subject) {
  const [level, mode, g] = await Promise.all([
    own(`/config/${enc(subject)}`, "compatibilityLevel", 40408),
    own(`/mode/${enc(subject)}`, "mode", 40409),
    globals(),
  ]);
  return { level, mode, global: g };
}

function versionsSection(subject, versions, chosen) {
  return h("section", { id: "versions" }, h("h2", {}, "Versions"), table(
    [
      { label: "Version", cell: (v) => h("a", { href: subjectHref(subject, { v: v.version }) }, String(v.version)), num: true },
      { label: "Id", cell: (v) => String(v.id), num: true },
      { label: "Type", cell: (v) => v.schemaType || "AVRO" },
      { label: "State", cell: (v) => (v.deleted ? pill("soft-deleted") : pill("live")) },
      { label: "", cell: (v) => deleteVersionButton(subject, v) },
    ],
    versions,
    { rowClass: (v) => `version${v.version === chosen.version ? " chosen" : ""}${v.deleted ? " deleted" : ""}` },
  ));
}

function deleteVersionButton(subject, v) {
  const permanent = Boolean(v.deleted);
  return h("button", { class: permanent ? "danger" : "", "data-delete-version": v.version, onclick: async () => {
    const text = permanent
      ? `Delete version ${v.version} of ${subject} permanently? Its schema id ${v.id} stops resolving if no other version uses it.`
      : `Soft-delete version ${v.version} of ${subject}? Serializers stop using it; it can still be read with deleted=true.`;
    if (!(await confirmAction(text, permanent ? `${subject} v${v.version}` : null))) return;
    try {
      await registry(`/subjects/${enc(subject)}/versions/${v.version}`, { method: "DELETE", query: { permanent: permanent || null } });
      flash(`${permanent ? "Permanently deleted" : "Soft-deleted"} version ${v.version} of ${subject}`);
      goTo(subjectHref(subject));
    } catch (err) {
      flash(`Delete failed: ${describe(err)}`, "error");
    }
  } }, permanent ? "Delete permanently" : "Delete");
}

function diffSection(subject, versions, query) {
  const options = (id, selected) => h("select", { id }, versions.map((v) => h("option", { value: v.version, selected: v.version === selected }, `v${v.version}${v.deleted ? " (deleted)" : ""}`)));
  const last = versions[versions.length - 1].version;
  const before = Number(query.get("from") || (versions.length > 1 ? versions[versions.length - 2].version : last));
  const after = Number(query.get("to") || last);
  const from = options("diff-from", before);
  const to = options("diff-to", after);
  const out = h("div", { id: "diff" });
  const draw = () => {
    const a = versions.find((v) => String(v.version) === from.value);
    const b = versions.find((v) => String(v.version) === to.value);
    out.replaceChildren(diffView(pretty(a.schema, a.schemaType), pretty(b.schema, b.schemaType)));
  };
  from.onchange = draw;
  to.onchange = draw;
  draw();
  return h("section", { id: "diff-section" }, h("h2", {}, "Diff"),
    h("div", { class: "toolbar" }, h("label", {}, "From", from), h("label", {}, "To", to)), out);
}

function settingsSection(subject, s) {
  const box = h("section", { id: "settings" }, h("h2", {}, "Compatibility and mode"));
  box.append(h("div", { class: "cards" },
    h("div", { class: "card" }, h("div", { class: "label" }, "Compatibility"), h("div", { class: "value", id: "subject-level" }, shown(s.level, s.global.level))),
    h("div", { class: "card" }, h("div", { class: "label" }, "Mode"), h("div", { class: "value", id: "subject-mode" }, shown(s.mode, s.global.mode)))));
  const base = `/config/${enc(subject)}`;
  box.append(settingForm("level", "Compatibility level", LEVELS, s.level.value || (s.global.level instanceof Error ? "BACKWARD" : s.global.level),
    (value) => registry(base, { method: "PUT", body: { compatibility: value } }), () => registry(base, { method: "DELETE" })));
  const mode = `/mode/${enc(subject)}`;
  box.append(settingForm("mode", "Mode", MODES, s.mode.value || (s.global.mode instanceof Error ? "READWRITE" : s.global.mode),
    (value) => registry(mode, { method: "PUT", body: { mode: value } }), () => registry(mode, { method: "DELETE" })));
  return box;
}

// One setting's form: set it, or go back to what the level above says (the global one, or the default).
export function settingForm(id, label, choices, current, put, remove) {
  const select = h("select", { id: `set-${id}` }, choices.map((c) => h("option", { value: c, selected: c === current }, c)));
  const done = (text) => { flash(text); reload(); };
  return h("form", { class: "toolbar", onsubmit: async (e) => {
    e.preventDefault();
    try { await put(select.value); done(`${label} set to ${select.value}`); } catch (err) { flash(`${label}: ${describe(err)}`, "error"); }
  } }, h("label", {}, label, select), h("button", { type: "submit", id: `save-${id}` }, "Save"),
  remove ? h("button", { type: "button", id: `reset-${id}`, onclick: async () => {
    try { await remove(); done(`${label}: back to the global one`); } catch (err) { flash(`${label}: ${describe(err)}`, "error"); }
  } }, "Use the global one") : null);
}

function dangerZone(subject, allDeleted) {
  const button = allDeleted
    ? h("button", { class: "danger", id: "delete-subject", onclick: () => deleteSubject(subject, true) }, "Delete subject permanently")
    : h("button", { class: "danger", id: "delete-subject", onclick: () => deleteSubject(subject, false) }, "Delete subject");
  return h("section", { id: "danger" }, h("h2", {}, "Danger zone"),
    h("p", { class: "muted" }, allDeleted
      ? "Every version is soft-deleted: a permanent delete removes them, and the subject's level and mode."
      : "A soft delete keeps every version readable with deleted=true; a permanent delete can follow."),
    button);
}

async function deleteSubject(subject, permanent) {
  const text = permanent
    ? `Delete subject ${subject} permanently, every version included? This cannot be undone.`
    : `Soft-delete every version of subject ${subject}?`;
  if (!(await confirmAction(text, subject))) return;
  try {
    const gone = await registry(`/subjects/${enc(subject)}`, { method: "DELETE", query: { permanent: permanent || null } });
    flash(`${permanent ? "Permanently deleted" : "Soft-deleted"} ${subject}: version(s) ${gone.map(num).join(", ")}`);
    goTo(permanent ? "#/schemas" : subjectHref(subject));
  } catch (err) {
    flash(`Delete failed: ${describe(err)}`, "error");
  }
}

async function renderGlobal(main) {
  main.append(h("h1", {}, "Global compatibility and mode"), h("p", {}, h("a", { href: "#/schemas" }, "← every subject")));
  const g = await globals();
  main.append(globalSettings(g));
  main.append(settingForm("global-level", "Compatibility level", LEVELS, g.level instanceof Error ? "BACKWARD" : g.level,
    (value) => registry("/config", { method: "PUT", body: { compatibility: value } }), null));
  main.append(settingForm("global-mode", "Mode", MODES, g.mode instanceof Error ? "READWRITE" : g.mode,
    (value) => registry("/mode", { method: "PUT", body: { mode: value } }), null));
}
