// API tokens (tenant-admin and cluster-admin): the list, a new token (its secret is shown once,
// here, and never again), and revoke.
import { del, get, post } from "../api";
import { h, replace } from "../dom";
import { time } from "../format";
import { poll } from "../poll";
import type { Page } from "../router";
import { can, whoami } from "../session";
import type { TenantList, Token, TokenCreated, TokenList } from "../types";
import { card, emptyRow, messageBox, table } from "../ui";

const kRoles = ["viewer", "member", "tenant-admin", "cluster-admin"];

export function tokensPage(): Page {
  const msg = messageBox();
  const createMsg = messageBox();
  const cols = ["ID", "Name", "Tenant", "Role", "Created", "Expires", "State", ""];
  const t = table(cols, "tokens");

  async function refresh(): Promise<void> {
    const { tokens } = await get<TokenList>("/v1/tokens");
    replace(
      t.body,
      tokens.length === 0
        ? emptyRow(cols.length, "No tokens.")
        : tokens.map((k) => {
            const expired = k.expires_at !== null && Date.parse(k.expires_at) < Date.now();
            const live = !k.revoked_at && !expired;
            return h(
              "tr",
              { "data-token": k.id },
              h("td", { class: "num" }, "#" + k.id),
              h("td", null, k.name),
              h("td", null, k.tenant),
              h("td", null, h("span", { class: "chip role" }, k.role)),
              h("td", null, time(k.created_at)),
              h("td", null, k.expires_at ? time(k.expires_at) : "never"),
              h("td", null, k.revoked_at ? h("span", { class: "badge state-cancelled" }, "revoked") : expired ? h("span", { class: "badge state-failed" }, "expired") : h("span", { class: "badge state-succeeded" }, "active")),
              h("td", null, live && k.id !== whoami()?.token_id ? h("button", { class: "btn small danger", onclick: (ev: Event) => confirmRevoke(ev.currentTarget as HTMLButtonElement, k) }, "Revoke") : null),
            );
          }),
    );
  }

  function confirmRevoke(button: HTMLButtonElement, k: Token): void {
    if (button.dataset.confirm) {
      del(`/v1/tokens/${k.id}`)
        .then(() => poller.now())
        .catch((e) => msg.show(e));
      return;
    }
    button.dataset.confirm = "1";
    replace(button, "Confirm revoke");
    setTimeout(() => {
      delete button.dataset.confirm;
      replace(button, "Revoke");
    }, 5000);
  }

  const name = h("input", { type: "text", id: "token-name", placeholder: "ci-pipeline", "data-field": "name" });
  const role = h("select", { id: "token-role", "data-field": "role" }, kRoles.filter((r) => r !== "cluster-admin" || can.operate()).map((r) => h("option", { value: r, selected: r === "member" }, r)));
  const tenant = h("select", { id: "token-tenant", "data-field": "tenant_id" });
  const me = whoami();
  if (me?.tenant_id !== null && me?.tenant_id !== undefined) tenant.append(h("option", { value: me.tenant_id }, me.tenant));
  if (can.operate()) {
    get<TenantList>("/v1/tenants")
      .then((r) => replace(tenant, r.tenants.map((x) => h("option", { value: x.id, selected: x.id === me?.tenant_id }, x.name))))
      .catch(() => {});
  }
  const expires = h("input", { type: "date", id: "token-expires", "data-field": "expires_at" });
  const secret = h("div", { class: "secret", hidden: true, id: "new-token" });
  const create = h(
    "div",
    null,
    h("div", { class: "inline-fields" }, h("label", null, "Name", name), h("label", null, "Tenant", tenant), h("label", null, "Role", role), h("label", null, "Expires (optional)", expires)),
    createMsg.el,
    h(
      "div",
      { class: "form-actions" },
      h(
        "button",
        {
          class: "btn primary",
          id: "create-token",
          onclick: async () => {
            createMsg.show(null);
            secret.hidden = true;
            try {
              const body: Record<string, unknown> = { tenant_id: Number(tenant.value), role: role.value, name: name.value.trim() };
              if (expires.value) body.expires_at = new Date(expires.value + "T23:59:59Z").toISOString().replace(/\.\d+Z$/, "Z");
              const r = await post<TokenCreated>("/v1/tokens", body);
              const value = h("code", { class: "token-value" }, r.token);
              replace(
                secret,
                h("strong", null, `Token "${r.name}" (${r.role}) created. Copy it now: it is not shown again.`),
                h("div", { class: "secret-row" }, value, h("button", { class: "btn small", onclick: () => void navigator.clipboard?.writeText(r.token) }, "Copy")),
              );
              secret.hidden = false;
              name.value = "";
              poller.now();
            } catch (e) {
              createMsg.show(e);
            }
          },
        },
        "Create token",
      ),
    ),
    secret,
  );

  const poller = poll(10000, refresh, (e) => msg.show(e));
  const el = h("div", { class: "page" }, h("div", { class: "page-head" }, h("h1", null, "API tokens")), msg.el, card("New token", create), card("Tokens", t.el));
  return { title: "Tokens", el, dispose: () => poller.stop() };
}
