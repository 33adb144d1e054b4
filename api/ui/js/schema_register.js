// Registering a schema from the console: under a new subject (from the Schemas list) or as a subject's next
// version. The schema is checked first (POST /compatibility/subjects/{s}/versions?verbose=true, against the
// versions the subject's level names) and registered only if compatible; the reasons are shown if not.
import { describe, registry } from "./api.js";
import { flash, h } from "./dom.js";
import { pretty } from "./schema_diff.js";

const TYPES = ["AVRO", "JSON", "PROTOBUF"];

// `subject` null: the form asks for one. `latest`: the version the text starts from. `done(subject)` runs
// after a registration.
export function registerForm(subject, latest, done) {
  const name = subject === null ? h("input", { id: "register-subject", required: true, placeholder: "orders-value" }) : null;
  const kind = latest ? latest.schemaType || "AVRO" : "AVRO";
  const type = h("select", { id: "register-type" }, TYPES.map((t) => h("option", { value: t, selected: t === kind }, t)));
  const text = h("textarea", { id: "register-schema", rows: 12, cols: 90, placeholder: "the schema: Avro or JSON Schema as JSON, Protobuf as .proto text" });
  if (latest) text.value = pretty(latest.schema, latest.schemaType);
  const refs = h("input", { id: "register-references", placeholder: '[{"name": "...", "subject": "...", "version": 1}]', style: "width:420px" });
  const result = h("div", { id: "register-result" });
  const target = () => (subject === null ? name.value.trim() : subject);
  const body = () => {
    const out = { schema: text.value, schemaType: type.value };
    if (refs.value.trim()) {
      try { out.references = JSON.parse(refs.value); } catch { throw new Error("references must be a JSON array of {name, subject, version}"); }
    }
    return out;
  };
  const check = async () => {
    const answer = await registry(`/compatibility/subjects/${encodeURIComponent(target())}/versions`, { method: "POST", body: body(), query: { verbose: true } });
    result.replaceChildren(answer.is_compatible
      ? h("p", { class: "ok", id: "compat-ok" }, "Compatible with the versions the subject's level names.")
      : h("div", { class: "bad", id: "compat-bad" }, h("p", {}, "Incompatible:"), h("ul", {}, (answer.messages || []).map((m) => h("li", {}, m)))));
    return answer.is_compatible;
  };
  const guard = (action) => async (e) => {
    if (e) e.preventDefault();
    if (!target()) { flash("Name the subject first", "error"); return; }
    try { await action(); } catch (err) {
      result.replaceChildren(h("p", { class: "bad", id: "register-error" }, describe(err)));
      flash(`${describe(err)}`, "error");
    }
  };
  const register = guard(async () => {
    if (!(await check())) { flash("Not registered: the schema is incompatible", "error"); return; }
    const answer = await registry(`/subjects/${encodeURIComponent(target())}/versions`, { method: "POST", body: body() });
    flash(`Registered ${target()} version ${answer.version} (id ${answer.id})`);
    done(target());
  });
  return h("details", { id: "register", open: subject !== null }, h("summary", {}, subject === null ? "Register a schema" : "Register a new version"),
    h("form", { class: "stack", onsubmit: register },
      name ? h("label", {}, "Subject", name) : null,
      h("label", {}, "Type", type), h("label", {}, "Schema", text), h("label", {}, "References (optional, JSON)", refs),
      h("div", { class: "toolbar" },
        h("button", { type: "button", id: "check-schema", onclick: guard(check) }, "Check compatibility"),
        h("button", { type: "submit", class: "primary", id: "register-send" }, "Check and register")),
      result));
}
