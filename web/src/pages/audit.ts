// The audit log (who changed what, when, with what outcome), newest first, paged by cursor.
import { get, withQuery } from "../api";
import { h, replace } from "../dom";
import { time } from "../format";
import type { Page } from "../router";
import type { AuditPage } from "../types";
import { emptyRow, messageBox, table } from "../ui";

export function auditPage(): Page {
  const msg = messageBox();
  const cols = ["Time", "Actor", "Role", "Tenant", "Request", "Target", "Status", "Request id"];
  const t = table(cols, "audit");
  const more = h("button", { class: "btn", id: "audit-more", hidden: true, onclick: () => void load() }, "Older entries");
  let cursor: string | null = "";
  let first = true;

  async function load(): Promise<void> {
    try {
      const r = await get<AuditPage>(withQuery("/v1/audit", { limit: 100, cursor }));
      if (first) replace(t.body, r.entries.length ? null : emptyRow(cols.length, "No entries."));
      first = false;
      t.body.append(
        ...r.entries.map((e) =>
          h(
            "tr",
            null,
            h("td", { class: "nowrap" }, time(e.time)),
            h("td", null, e.actor),
            h("td", null, e.role),
            h("td", null, e.tenant),
            h("td", null, h("code", null, `${e.method} ${e.route}`)),
            h("td", null, e.target),
            h("td", { class: e.status >= 400 ? "num bad" : "num" }, String(e.status)),
            h("td", null, h("code", { class: "small" }, e.request_id)),
          ),
        ),
      );
      cursor = r.next_cursor;
      more.hidden = !cursor;
    } catch (e) {
      msg.show(e);
    }
  }
  void load();
  return { title: "Audit", el: h("div", { class: "page" }, h("div", { class: "page-head" }, h("h1", null, "Audit log")), msg.el, t.el, more) };
}
