// Nodes: state, slots used and free, cores, GPUs and memory, the jobs running on each, and
// drain / undrain for operators (cluster-admin). Utilisation is not in the REST API (the agents
// export it to Prometheus, agent/node/node_collector.h), so it is not shown here.
import { get, post } from "../api";
import { h, replace } from "../dom";
import { age, bytes } from "../format";
import { poll } from "../poll";
import type { Page } from "../router";
import { can } from "../session";
import type { Job, JobPage, NodeInfo, NodeList } from "../types";
import { emptyRow, messageBox, table } from "../ui";

export function nodesPage(): Page {
  const msg = messageBox();
  const actionMsg = messageBox();
  const cols = ["Node", "State", "Slots", "CPU", "GPUs", "Memory", "Running jobs", "Last heartbeat"];
  if (can.operate()) cols.push("");
  const t = table(cols, "nodes");
  const summary = h("div", { class: "muted", id: "nodes-summary" });

  async function refresh(): Promise<void> {
    const [{ nodes }, running] = await Promise.all([get<NodeList>("/v1/nodes"), runningJobs()]);
    const onNode = new Map<number, Job[]>();
    for (const j of running) for (const a of j.allocation) onNode.set(a.node_id, [...(onNode.get(a.node_id) ?? []), j]);
    let total = 0;
    let used = 0;
    for (const n of nodes) if (n.state === "UP") ((total += slotsOf(n)), (used += n.slots_used));
    replace(summary, `${nodes.filter((n) => n.state === "UP").length} of ${nodes.length} nodes up · ${used} of ${total} slots in use`);
    const now = Date.now();
    replace(
      t.body,
      nodes.length === 0
        ? emptyRow(cols.length, "No nodes have registered.")
        : nodes.map((n) => {
            const slots = slotsOf(n);
            const jobs = onNode.get(n.id) ?? [];
            return h(
              "tr",
              { "data-node": n.name },
              h("td", null, h("strong", null, n.name), h("div", { class: "muted small" }, n.address)),
              h("td", null, h("span", { class: "badge node-" + n.state.toLowerCase() }, n.state), n.draining ? h("span", { class: "badge draining" }, "draining") : null),
              h(
                "td",
                null,
                h("div", { class: "slots" }, h("div", { class: "bar" }, h("div", { class: "fill", style: `width:${slots ? (100 * n.slots_used) / slots : 0}%` })), `${n.slots_used} used · ${Math.max(0, slots - n.slots_used)} free`),
              ),
              h("td", null, `${n.cpu_slots} ${n.cpu_slots === 1 ? "core" : "cores"}`),
              h("td", null, n.gpus.length ? `${n.gpus.length} × ${n.gpus[0].name ?? "GPU"}` : "none"),
              h("td", null, bytes(n.memory_bytes)),
              h("td", null, jobs.length ? jobs.map((j) => h("div", null, h("a", { href: "/jobs/" + j.id }, `#${j.id} ${j.name}`))) : h("span", { class: "muted" }, "—")),
              h("td", { title: n.last_heartbeat }, age(n.last_heartbeat, now) + " ago"),
              can.operate()
                ? h(
                    "td",
                    null,
                    n.draining
                      ? h("button", { class: "btn small", onclick: () => void act(n, "undrain") }, "Undrain")
                      : h("button", { class: "btn small", onclick: () => void act(n, "drain") }, "Drain"),
                  )
                : null,
            );
          }),
    );
  }

  async function act(n: NodeInfo, what: "drain" | "undrain"): Promise<void> {
    try {
      actionMsg.show(null);
      await post(`/v1/nodes/${n.id}/${what}`);
      actionMsg.info(`${n.name}: ${what === "drain" ? "draining (no new jobs are placed on it)" : "accepting jobs again"}.`);
      poller.now();
    } catch (e) {
      actionMsg.show(e);
    }
  }

  const poller = poll(3000, refresh, (e) => msg.show(e));
  const el = h(
    "div",
    { class: "page" },
    h("div", { class: "page-head" }, h("h1", null, "Nodes"), summary),
    msg.el,
    actionMsg.el,
    t.el,
    h("p", { class: "muted small" }, "CPU and GPU utilisation appear under each node where its agent reports them."),
  );
  return { title: "Nodes", el, dispose: () => poller.stop() };
}

export function slotsOf(n: NodeInfo): number {
  return n.gpus.length > 0 ? n.gpus.length : n.cpu_slots;
}

// Jobs holding slots now: RUNNING, plus SCHEDULED and CANCELLING (a few pages at most).
export async function runningJobs(): Promise<Job[]> {
  const out: Job[] = [];
  for (const state of ["RUNNING", "SCHEDULED", "CANCELLING"]) {
    let cursor = "";
    for (let i = 0; i < 10; i++) {
      const p = await get<JobPage>(`/v1/jobs?limit=500&state=${state}${cursor ? "&cursor=" + cursor : ""}`);
      out.push(...p.jobs);
      if (!p.next_cursor) break;
      cursor = p.next_cursor;
    }
  }
  return out;
}
