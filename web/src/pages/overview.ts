// Cluster overview: jobs by state, slots in use, nodes up, throughput summed across running jobs
// over the last half hour, and the newest jobs. An operator's job counts come from the server's
// embody_jobs gauge (GET /metrics with a cluster-admin's token: every job, without listing them);
// other roles see their tenant's live jobs counted from the job list.
import uPlot from "uplot";

import { authHeaders, get, withQuery } from "../api";
import { h, replace } from "../dom";
import { age, num } from "../format";
import { poll } from "../poll";
import type { Page } from "../router";
import { can } from "../session";
import { kJobStates, type JobPage, type MetricsSeries, type NodeList } from "../types";
import { card, emptyRow, messageBox, progress, stat, stateBadge, table } from "../ui";
import { runningJobs, slotsOf } from "./nodes";

// The caller's jobs that have not ended (a few pages at most).
async function liveJobs() {
  const out = await runningJobs();
  for (const state of ["PENDING", "RESTARTING"]) out.push(...(await get<JobPage>(`/v1/jobs?limit=500&state=${state}`)).jobs);
  return out;
}

const kWindowMs = 30 * 60 * 1000;
const kBucketMs = 30 * 1000;

// embody_jobs{state="RUNNING",tenant="default"} 3
export function jobCounts(metricsText: string, tenant: string | null): Map<string, number> {
  const counts = new Map<string, number>();
  const re = /^embody_jobs\{([^}]*)\}\s+([0-9.eE+-]+)\s*$/gm;
  for (let m = re.exec(metricsText); m; m = re.exec(metricsText)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (tenant !== null && labels.tenant !== tenant) continue;
    counts.set(labels.state, (counts.get(labels.state) ?? 0) + Number(m[2]));
  }
  return counts;
}

export function overviewPage(): Page {
  const msg = messageBox();
  const states = h("div", { class: "stats", id: "job-counts" });
  const capacity = h("div", { class: "stats", id: "capacity" });
  const chartEl = h("div", { class: "chart", id: "throughput" });
  const chartNote = h("p", { class: "muted" });
  const recent = table(["ID", "Name", "Tenant", "State", "Age", "Progress", "Tokens/s"], "jobs");
  let plot: uPlot | null = null;
  const history = new Map<number, Map<number, number>>(); // job -> time bucket -> tokens/s

  async function refreshCounts(): Promise<void> {
    let counts = new Map<string, number>();
    let shown = ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"];
    if (can.operate()) {
      const res = await fetch("/metrics", { cache: "no-store", headers: authHeaders() });
      if (!res.ok) throw new Error("GET /metrics: HTTP " + res.status);
      counts = jobCounts(await res.text(), null);
    } else {
      for (const j of await liveJobs()) counts.set(j.state, (counts.get(j.state) ?? 0) + 1);
      shown = ["PENDING", "RUNNING"];
    }
    replace(
      states,
      kJobStates
        .filter((s) => shown.includes(s) || (counts.get(s) ?? 0) > 0)
        .map((s) => stat(s.charAt(0) + s.slice(1).toLowerCase(), h("a", { href: "/jobs?state=" + s }, String(counts.get(s) ?? 0)), "state-" + s.toLowerCase())),
    );
  }

  async function refreshCluster(): Promise<void> {
    const [{ nodes }, running, page] = await Promise.all([get<NodeList>("/v1/nodes"), runningJobs(), get<JobPage>("/v1/jobs?limit=50")]);
    let slots = 0;
    let used = 0;
    for (const n of nodes) if (n.state === "UP") ((slots += slotsOf(n)), (used += n.slots_used));
    const tput = running.reduce((s, j) => s + (typeof j.last_step?.tokens_per_s === "number" && j.state === "RUNNING" ? j.last_step.tokens_per_s : 0), 0);
    replace(
      capacity,
      stat("Slots in use", `${used} / ${slots}`),
      stat("Nodes up", `${nodes.filter((n) => n.state === "UP").length} / ${nodes.length}`),
      stat("Tokens / s now", num(tput)),
    );
    replace(
      recent.body,
      page.jobs.length === 0
        ? emptyRow(7, "No jobs yet.")
        : page.jobs.slice(0, 8).map((j) =>
            h(
              "tr",
              null,
              h("td", { class: "num" }, h("a", { href: "/jobs/" + j.id }, "#" + j.id)),
              h("td", { class: "name" }, h("a", { href: "/jobs/" + j.id }, j.name)),
              h("td", null, j.tenant),
              h("td", null, stateBadge(j.state)),
              h("td", null, age(j.created_at)),
              h("td", null, progress(j.last_step?.step, j.last_step?.steps)),
              h("td", { class: "num" }, num(j.last_step?.tokens_per_s)),
            ),
          ),
    );
    // Running jobs, and the newest that ran within the window.
    const since = Date.now() - kWindowMs;
    const ids = new Set(running.filter((j) => j.state === "RUNNING").map((j) => j.id));
    for (const j of page.jobs) if (j.started_at && (!j.finished_at || Date.parse(j.finished_at) > since)) ids.add(j.id);
    await refreshThroughput([...ids].slice(0, 20));
  }

  // Each running job's tokens/s over the window, latest value per bucket, summed over jobs.
  async function refreshThroughput(ids: number[]): Promise<void> {
    const since = new Date(Date.now() - kWindowMs).toISOString().replace(/\.\d+Z$/, "Z");
    await Promise.all(
      ids.map(async (id) => {
        const r = await get<MetricsSeries>(withQuery(`/v1/jobs/${id}/metrics`, { names: "tokens_per_s", since, max_points: 200 }));
        const b = history.get(id) ?? new Map<number, number>();
        for (const [, t, v] of r.series.tokens_per_s ?? []) b.set(Math.floor(t / kBucketMs) * kBucketMs, v);
        history.set(id, b);
      }),
    );
    const start = Math.floor((Date.now() - kWindowMs) / kBucketMs) * kBucketMs;
    const xs: number[] = [];
    const ys: (number | null)[] = [];
    for (let t = start; t <= Date.now(); t += kBucketMs) {
      let sum = 0;
      let any = false;
      for (const b of history.values()) {
        const v = b.get(t);
        if (v !== undefined) ((sum += v), (any = true));
      }
      xs.push(t / 1000);
      ys.push(any ? sum : null);
    }
    const points = ys.filter((y) => y !== null).length;
    chartEl.dataset.points = String(points);
    replace(chartNote, points ? "Summed over running jobs and those that ran in the last 30 minutes." : "No job has reported throughput in the last 30 minutes.");
    const data: uPlot.AlignedData = [xs, ys];
    if (plot) plot.setData(data);
    else
      plot = new uPlot(
        {
          title: "Throughput across jobs (tokens / s, 30 s buckets)",
          width: Math.max(400, chartEl.clientWidth || 1200),
          height: 220,
          scales: { x: { time: true } },
          series: [{}, { label: "tokens / s", stroke: "#2456c7", fill: "rgba(36,86,199,0.08)", width: 1.5, points: { show: true, size: 4 } }],
          axes: [{ stroke: "#555", grid: { stroke: "#eee" } }, { size: 60, stroke: "#555", grid: { stroke: "#eee" }, values: (_, t) => t.map((v) => num(v)) }],
        },
        data,
        chartEl,
      );
  }

  const countsPoller = poll(5000, refreshCounts, (e) => msg.show(e));
  const clusterPoller = poll(5000, refreshCluster, (e) => msg.show(e));
  const resize = new ResizeObserver(() => plot && chartEl.clientWidth && plot.setSize({ width: chartEl.clientWidth, height: 220 }));
  resize.observe(chartEl);

  const el = h(
    "div",
    { class: "page overview" },
    h("div", { class: "page-head" }, h("h1", null, "Cluster overview")),
    msg.el,
    h("div", { class: "two" }, card("Jobs by state", states), card("Capacity", capacity)),
    card("Throughput", chartEl, chartNote),
    card("Newest jobs", recent.el, h("p", null, h("a", { href: "/jobs" }, "All jobs →"))),
  );
  return {
    title: "Overview",
    el,
    dispose() {
      countsPoller.stop();
      clusterPoller.stop();
      resize.disconnect();
      plot?.destroy();
    },
  };
}
