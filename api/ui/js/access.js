// Access: Kafka's ACLs and the SCRAM users stored at run time, as GET /v1/acls and GET /v1/users show them
// (both need DESCRIBE on the cluster). A principal filter narrows the ACLs; changes go through the API or
// Kafka's admin tools (docs/operations.md).
import { api, describe } from "./api.js";
import { h, table } from "./dom.js";

export async function render(main, _params, query) {
  const principal = query.get("principal") || "";
  main.append(h("h1", {}, "Access"));
  const principalIn = h("input", { id: "acl-principal", placeholder: "User:name", value: principal });
  main.append(h("form", { class: "toolbar", onsubmit: (e) => {
    e.preventDefault();
    location.hash = `#/access?${new URLSearchParams({ principal: principalIn.value })}`;
  } }, h("label", {}, "Principal", principalIn), h("button", { type: "submit" }, "Show")));
  try {
    const acls = await api("/v1/acls", { query: { principal } });
    main.append(h("h2", {}, "ACLs"), table(
      [
        { label: "Principal", cell: (a) => a.principal },
        { label: "Permission", cell: (a) => a.permission },
        { label: "Operation", cell: (a) => a.operation },
        { label: "Resource", cell: (a) => a.resource_type },
        { label: "Pattern", cell: (a) => a.pattern_type },
        { label: "Name", cell: (a) => a.resource_name, cls: "data" },
        { label: "Host", cell: (a) => a.host },
      ],
      acls.acls,
      { empty: "No ACLs: only super users may do anything." },
    ));
    const users = await api("/v1/users");
    main.append(h("h2", {}, "SCRAM users stored at run time"), table(
      [
        { label: "User", cell: (u) => u.name },
        { label: "Credentials", cell: (u) => u.credentials.map((c) => `${c.mechanism} (${c.iterations} iterations)`).join(", ") },
      ],
      users.users,
      { empty: "No SCRAM users besides the principals file's." },
    ));
  } catch (err) {
    main.append(h("p", { class: "bad", id: "access-error" }, `Could not load access: ${describe(err)}`));
  }
}
