// Jobs: newest first, filtered by state, tenant (operators: tenant_id) and name (q), paged by the server's
// cursor (GET /v1/jobs?limit&cursor: ids below the cursor), refreshed every few seconds. The URL
// holds the filters and the page's cursor, so a reload or a shared link shows the same page.
// Ticked jobs (kept across pages and refreshes) open side by side in /compare.
import { get, withQuery } from "../api";
import { h, replace } from "../dom";
import { age, num } from "../format";
import { poll } from "../poll";
import { navigate, setQuery, type Page } from "../router";
import { can } from "../session";
import { kJobStates, type JobPage, type TenantList } from "../types";
import { emptyRow, messageBox, progress, stateBadge, table } from "../ui";

const kPageSize = 50;

export function jobsPage(_: Record<string, string>, query: URLSearchParams): Page {
  const msg = messageBox();
  const filters = {
    state: query.get("state") ?? "",
    tenant_id: query.get("tenant_id") ?? "",
    q: query.get("q") ?? "",
  };
  let cursor = query.get("cursor") ?? "";
  // Cursors of the pages before this one, for "Newer".
  const back: string[] = [];
  let next: string | null = null;

  const cols = ["", "ID", "Name", "Tenant", "State", "Age", "Progress", "Tokens/s", "Loss", "Reason"];
  const t = table(cols, "jobs");
  // Ticked for comparison, in the order ticked.
  const picked: number[] = [];
  const compare = h("button", { class: "btn", id: "compare-jobs", disabled: true, onclick: () => navigate("/compare?jobs=" + picked.join(",")) }, "Compare");
  function pick(id: number, on: boolean): void {
    const at = picked.indexOf(id);
    if (on && at < 0) picked.push(id);
    if (!on && at >= 0) picked.splice(at, 1);
    compare.disabled = picked.length < 2;
    replace(compare, picked.length ? `Compare ${picked.length}` : "Compare");
    compare.title = picked.length < 2 ? "Tick two or more jobs to compare them" : picked.map((i) => "#" + i).join(", ");
  }
  pick(0, false);
  const info = h("span", { class: "muted", id: "page-info" });
  const newer = h("button", { class: "btn", id: "newer", onclick: () => go(back.pop() ?? "") }, "← Newer");
  const older = h("button", { class: "btn", id: "older", onclick: () => next && (back.push(cursor), go(next)) }, "Older →");

  const state = h(
    "select",
    { id: "filter-state", onchange: () => setFilter("state", state.value) },
    h("option", { value: "" }, "All states"),
    kJobStates.map((s) => h("option", { value: s, selected: s === filters.state }, s)),
  );
  const search = h("input", {
    id: "filter-q",
    type: "search",
    placeholder: "Search by name",
    value: filters.q,
    oninput: () => {
      window.clearTimeout(searchTimer);
      searchTimer = window.setTimeout(() => setFilter("q", search.value.trim()), 250);
    },
  });
  let searchTimer: number | undefined;
  const tenant = h("select", { id: "filter-tenant", onchange: () => setFilter("tenant_id", tenant.value) }, h("option", { value: "" }, "All tenants"));
  if (filters.tenant_id) tenant.append(h("option", { value: filters.tenant_id, selected: true }, "tenant " + filters.tenant_id));

  function syncUrl(): void {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    if (cursor) q.set("cursor", cursor);
    setQuery(q);
  }
  function setFilter(k: keyof typeof filters, v: string): void {
    filters[k] = v;
    back.length = 0;
    go("");
  }
  function go(c: string): void {
    cursor = c;
    syncUrl();
    poller.now();
  }

  let seq = 0;
  async function refresh(): Promise<void> {
    const mine = ++seq;
    const started = performance.now();
    const page = await get<JobPage>(
      withQuery("/v1/jobs", { limit: kPageSize, cursor, state: filters.state, tenant_id: filters.tenant_id, q: filters.q }),
    );
    if (mine !== seq) return; // a newer request (filter change) owns the table
    next = page.next_cursor;
    const now = Date.now();
    replace(
      t.body,
      page.jobs.length === 0
        ? emptyRow(cols.length, cursor ? "No older jobs." : "No jobs match.")
        : page.jobs.map((j) =>
            h(
              "tr",
              { "data-job": j.id },
              h(
                "td",
                { class: "pick" },
                h("input", {
                  type: "checkbox",
                  class: "pick-job",
                  "aria-label": "Compare job #" + j.id,
                  checked: picked.includes(j.id),
                  onchange: (ev: Event) => pick(j.id, (ev.target as HTMLInputElement).checked),
                }),
              ),
              h("td", { class: "num" }, h("a", { href: "/jobs/" + j.id }, "#" + j.id)),
              h("td", { class: "name" }, h("a", { href: "/jobs/" + j.id }, j.name || "(unnamed)")),
              h("td", null, j.tenant),
              h("td", null, stateBadge(j.state)),
              h("td", { title: j.created_at }, age(j.created_at, now)),
              h("td", null, progress(j.last_step?.step, j.last_step?.steps)),
              h("td", { class: "num" }, num(j.last_step?.tokens_per_s)),
              h("td", { class: "num" }, num(j.last_step?.loss)),
              h("td", { class: "reason", title: j.reason }, j.reason),
            ),
          ),
    );
    newer.disabled = !cursor;
    older.disabled = !next;
    replace(info, page.jobs.length ? `#${page.jobs[0].id} – #${page.jobs[page.jobs.length - 1].id}` : "");
    t.el.dataset.loadedMs = String(Math.round(performance.now() - started));
    t.el.dataset.ready = "1";
  }
  const poller = poll(3000, refresh, (e) => msg.show(e));

  if (can.operate()) {
    get<TenantList>("/v1/tenants")
      .then((r) =>
        replace(
          tenant,
          h("option", { value: "" }, "All tenants"),
          r.tenants.map((x) => h("option", { value: x.id, selected: String(x.id) === filters.tenant_id }, x.name)),
        ),
      )
      .catch(() => {
        // No tenant list (older server or refused): the filter keeps only "All tenants".
      });
  }

  const el = h(
    "div",
    { class: "page" },
    h("div", { class: "page-head" }, h("h1", null, "Jobs"), can.submit() ? h("a", { class: "btn primary", href: "/submit", id: "new-job" }, "Submit a job") : null),
    h("div", { class: "toolbar" }, state, can.operate() ? tenant : null, search, h("span", { class: "grow" }), compare, info, newer, older),
    msg.el,
    t.el,
  );
  return { title: "Jobs", el, dispose: () => poller.stop() };
}
