// Tenants (cluster-admin): weights, quotas against current usage, edits guarded by the tenant's
// version (If-Match, so two operators cannot overwrite each other unseen), new tenants, and
// slot usage per day.
import { get, patch, post } from "../api";
import { h, replace } from "../dom";
import { bytes, num, time } from "../format";
import { poll } from "../poll";
import type { Page } from "../router";
import type { Quota, Tenant, TenantList, TenantUsage } from "../types";
import { card, emptyRow, messageBox, table } from "../ui";

const kQuotaKeys: (keyof Quota)[] = [
  "slots",
  "running_jobs",
  "pending_jobs",
  "nodes_per_job",
  "max_priority",
  "storage_bytes",
];
const kQuotaLabels: Record<keyof Quota, string> = {
  slots: "Slots",
  running_jobs: "Running jobs",
  pending_jobs: "Pending jobs",
  nodes_per_job: "Nodes per job",
  max_priority: "Max priority",
  storage_bytes: "Storage (GiB)",
};
const kGiB = 1024 ** 3;

// Every quota is a count but storage, which is bytes on the wire and GiB on the page.
function toInput(k: keyof Quota, v: number | null | undefined): string {
  if (v === null || v === undefined) return "";
  return k === "storage_bytes" ? String(v / kGiB) : String(v);
}

function fromInput(k: keyof Quota, v: string): number | null {
  if (v === "") return null;
  return k === "storage_bytes" ? Math.round(Number(v) * kGiB) : Number(v);
}

function quotaInputs(q: Partial<Quota> = {}): { el: HTMLElement; read(): Quota } {
  const inputs = kQuotaKeys.map((k) =>
    h("input", { type: "number", min: "0", step: k === "storage_bytes" ? "any" : "1", name: k, placeholder: "unlimited", value: toInput(k, q[k]), "data-field": "quota." + k }),
  );
  return {
    el: h("div", { class: "inline-fields" }, kQuotaKeys.map((k, i) => h("label", null, kQuotaLabels[k], inputs[i]))),
    read: () => Object.fromEntries(kQuotaKeys.map((k, i) => [k, fromInput(k, inputs[i].value)])) as unknown as Quota,
  };
}

export function tenantsPage(): Page {
  const msg = messageBox();
  const editMsg = messageBox();
  const cols = ["Tenant", "Weight", ...kQuotaKeys.map((k) => kQuotaLabels[k]), "Created", ""];
  const t = table(cols, "tenants");
  let editing: number | null = null;
  let tenants: Tenant[] = [];

  async function refresh(): Promise<void> {
    if (editing !== null) return; // do not redraw the row being edited
    tenants = (await get<TenantList>("/v1/tenants")).tenants;
    render();
  }

  function used(t: Tenant, k: keyof Quota): string {
    if (k === "storage_bytes") {
      const limit = t.quota?.storage_bytes;
      const held = bytes(t.usage?.storage_bytes);
      return `${held} / ${limit === null || limit === undefined ? "∞" : bytes(limit)}`;
    }
    const u = k === "slots" ? t.usage?.slots_in_use : k === "running_jobs" ? t.usage?.running_jobs : k === "pending_jobs" ? t.usage?.pending_jobs : null;
    const limit = t.quota?.[k];
    const l = limit === null || limit === undefined ? "∞" : String(limit);
    return u === null || u === undefined ? l : `${u} / ${l}`;
  }

  function render(): void {
    replace(
      t.body,
      tenants.length === 0
        ? emptyRow(cols.length, "No tenants.")
        : tenants.map((x) =>
            editing === x.id
              ? editRow(x)
              : h(
                  "tr",
                  { "data-tenant": x.name },
                  h("td", null, h("strong", null, x.name)),
                  h("td", { class: "num" }, String(x.weight)),
                  kQuotaKeys.map((k) => h("td", { class: "num" }, used(x, k))),
                  h("td", null, time(x.created_at)),
                  h(
                    "td",
                    null,
                    h("button", { class: "btn small", onclick: () => ((editing = x.id), render()) }, "Edit"),
                    " ",
                    h("button", { class: "btn small", onclick: () => void showUsage(x) }, "Usage"),
                  ),
                ),
          ),
    );
  }

  function editRow(x: Tenant): HTMLElement {
    const weight = h("input", { type: "number", min: "0", step: "any", value: x.weight, class: "short" });
    const q = quotaInputs(x.quota ?? {});
    return h(
      "tr",
      { class: "editing" },
      h("td", null, h("strong", null, x.name)),
      h(
        "td",
        { colspan: cols.length - 1 },
        h("div", { class: "inline-fields" }, h("label", null, "Weight", weight), q.el),
        h(
          "div",
          { class: "form-actions" },
          h(
            "button",
            {
              class: "btn primary small",
              onclick: async () => {
                try {
                  editMsg.show(null);
                  await patch(`/v1/tenants/${x.id}`, { weight: Number(weight.value), quota: q.read() }, { "If-Match": `"${x.version}"` });
                  editing = null;
                  poller.now();
                } catch (e) {
                  editMsg.show(e);
                }
              },
            },
            "Save",
          ),
          h("button", { class: "btn small", onclick: () => ((editing = null), editMsg.show(null), poller.now()) }, "Cancel"),
        ),
      ),
    );
  }

  // New tenant.
  const createMsg = messageBox();
  const name = h("input", { type: "text", id: "tenant-name", placeholder: "name", "data-field": "name" });
  const weight = h("input", { type: "number", min: "0", step: "any", value: "1", class: "short", "data-field": "weight" });
  const quota = quotaInputs();
  const create = h(
    "div",
    null,
    h("div", { class: "inline-fields" }, h("label", null, "Name", name), h("label", null, "Weight", weight), quota.el),
    createMsg.el,
    h(
      "div",
      { class: "form-actions" },
      h(
        "button",
        {
          class: "btn primary",
          onclick: async () => {
            try {
              createMsg.show(null);
              await post("/v1/tenants", { name: name.value.trim(), weight: Number(weight.value), quota: quota.read() });
              createMsg.info(`Tenant ${name.value.trim()} created.`);
              name.value = "";
              poller.now();
            } catch (e) {
              createMsg.show(e);
            }
          },
        },
        "Create tenant",
      ),
    ),
  );

  // Usage per day of one tenant.
  const usageTitle = h("h3", null);
  const usage = table(["Day", "Slot type", "Token", "Slot-hours"], "usage");
  const usageBox = h("div", { hidden: true }, usageTitle, usage.el);
  async function showUsage(x: Tenant): Promise<void> {
    try {
      const r = await get<TenantUsage>(`/v1/tenants/${x.id}/usage`);
      replace(usageTitle, `${x.name}: ${num(r.total_slot_seconds / 3600)} slot-hours in all`);
      replace(
        usage.body,
        r.days.length === 0
          ? emptyRow(4, "No usage recorded.")
          : r.days.map((d) => h("tr", null, h("td", null, d.day), h("td", null, d.slot_type), h("td", null, d.token_name ?? (d.token_id === null ? "—" : "#" + d.token_id)), h("td", { class: "num" }, num(d.slot_seconds / 3600)))),
      );
      usageBox.hidden = false;
    } catch (e) {
      editMsg.show(e);
    }
  }

  const poller = poll(5000, refresh, (e) => msg.show(e));
  const el = h(
    "div",
    { class: "page" },
    h("div", { class: "page-head" }, h("h1", null, "Tenants and quotas")),
    msg.el,
    editMsg.el,
    card("Tenants", t.el, usageBox),
    card("New tenant", create),
  );
  return { title: "Tenants", el, dispose: () => poller.stop() };
}
