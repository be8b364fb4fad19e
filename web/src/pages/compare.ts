// Several jobs side by side (/compare?jobs=1,2,3[&x=time]): their series overlaid on the same
// axes, one chart per series and one line (one colour) per job, by step or by time since each
// job started (a toggle); beside them, the keys where their specs differ. The charts open on
// the series of the jobs' kinds (panels.ts); every other series any of them reports (the
// numeric fields of their latest step events) is one click away and read when picked. Each
// job's series come from GET /v1/jobs/{id}/metrics with names= and max_points, all jobs at
// once; while any job is live they are read again every few seconds.
//
// "Any other series" is what the jobs' latest step events carry: a field only some steps carry
// is listed when the latest one did.
import uPlot from "uplot";

import { ApiError, get, withQuery } from "../api";
import { h, replace } from "../dom";
import { groupOf, groupRank, groupTitle, label, primaryNames } from "../panels";
import { align, chartWidth, kChartHeight, kPalette, makePlot } from "../plot";
import { poll } from "../poll";
import { setQuery, type Page } from "../router";
import { diffSpecs } from "../spec_diff";
import { kTerminal, type Job, type MetricsSeries, type SeriesMap } from "../types";
import { card, messageBox, stateBadge } from "../ui";

const kMaxJobs = 8;
const kMaxPoints = 1000; // per job and series: three jobs draw as many points as one job page
const kRanges: Record<string, [number, number]> = { success_rate: [0, 1], actor_idle_share: [0, 1], learner_idle_share: [0, 1], importance_capped: [0, 1] };

interface Points {
  steps: number[];
  times: number[]; // ms since the epoch
  values: number[];
}

interface Chart {
  name: string;
  el: HTMLElement;
  plot: uPlot | null;
}

export function parseJobIds(text: string | null): number[] {
  const ids: number[] = [];
  for (const s of (text ?? "").split(",")) {
    const t = s.trim().replace(/^#/, "");
    if (/^\d+$/.test(t) && Number(t) > 0 && !ids.includes(Number(t))) ids.push(Number(t));
  }
  return ids;
}

export function comparePage(_: Record<string, string>, query: URLSearchParams): Page {
  const ids = parseJobIds(query.get("jobs")).slice(0, kMaxJobs);
  let xMode: "step" | "time" = query.get("x") === "time" ? "time" : "step";
  const msg = messageBox();
  const jobs: (Job | null)[] = ids.map(() => null);
  const data = new Map<string, Points[]>(); // name -> one per job
  const charts = new Map<string, Chart>();
  const shown: string[] = [];
  const sync = "compare-" + Math.random().toString(36).slice(2);

  const legend = h("div", { class: "compare-jobs", id: "compare-jobs" });
  const grid = h("div", { class: "charts", id: "compare-charts" });
  const moreList = h("div", { class: "more-list", role: "group", "aria-label": "More series" });
  const empty = h("p", { class: "muted" }, "Loading…");
  const chartsEl = h("div", { id: "compare-metrics" }, empty, grid, h("div", { class: "more" }, h("h3", null, "More series"), moreList));
  const diffBody = h("tbody");
  const diffTable = h(
    "table",
    { class: "table spec-diff", id: "spec-diff" },
    h("thead", null, h("tr", null, h("th", null, "Key"), ids.map((id, i) => h("th", null, h("span", { class: "swatch", style: `background:${kPalette[i % kPalette.length]}` }), "#" + id)))),
    diffBody,
  );
  const tabs = h(
    "div",
    { class: "tabs" },
    h("button", { class: "tab", id: "x-step", onclick: () => setX("step") }, "By step"),
    h("button", { class: "tab", id: "x-time", onclick: () => setX("time") }, "By time"),
  );
  const resize = new ResizeObserver(() => {
    const width = chartWidth(grid.clientWidth);
    for (const c of charts.values()) if (c.plot && Math.abs(c.plot.width - width) > 2) c.plot.setSize({ width, height: kChartHeight });
  });
  resize.observe(grid);

  function setX(m: "step" | "time"): void {
    xMode = m;
    tabs.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t.id === "x-" + m));
    const q = new URLSearchParams(location.search);
    if (m === "time") q.set("x", "time");
    else q.delete("x");
    setQuery(q);
    for (const c of charts.values()) {
      c.plot?.destroy();
      c.plot = null;
    }
    draw();
  }

  // Where a job's time axis starts: its start, else its first point.
  function t0(i: number): number {
    const started = jobs[i]?.started_at;
    if (started) return Date.parse(started);
    let first = Infinity;
    for (const pts of data.values()) if (pts[i]?.times.length) first = Math.min(first, pts[i].times[0]);
    return Number.isFinite(first) ? first : 0;
  }

  function chartData(name: string): uPlot.AlignedData {
    const pts = data.get(name)!;
    const xs = pts.map((p, i) => {
      if (xMode === "step") return p.steps;
      const z = t0(i);
      return p.times.map((t) => (t - z) / 1000);
    });
    const ys = pts.map((p) => p.values);
    // Times follow steps; a restarted job's may not: sort those.
    xs.forEach((x, i) => {
      if (x.some((v, k) => k > 0 && v < x[k - 1])) {
        const order = x.map((_, k) => k).sort((a, b) => x[a] - x[b]);
        xs[i] = order.map((k) => x[k]);
        ys[i] = order.map((k) => ys[i][k]);
      }
    });
    return align(xs, ys);
  }

  function draw(): void {
    const els: HTMLElement[] = [];
    for (const name of shown) {
      if (!data.get(name)?.some((p) => p.values.length)) continue;
      let c = charts.get(name);
      if (!c) charts.set(name, (c = { name, el: h("div", { class: "chart", "data-series": name }), plot: null }));
      const d = chartData(name);
      c.el.dataset.points = String(data.get(name)!.reduce((n, p) => n + p.values.length, 0));
      c.el.dataset.x = xMode;
      if (c.plot) c.plot.setData(d);
      else {
        c.plot = makePlot(
          {
            title: groupTitle(name),
            labels: ids.map((id, i) => `#${id} ${jobs[i]?.name ?? ""}`.trim()),
            xLabel: xMode === "step" ? "step" : "seconds since start",
            width: chartWidth(grid.clientWidth),
            sync,
            range: kRanges[name],
          },
          d,
          c.el,
        );
      }
      els.push(c.el);
    }
    if (els.length !== grid.children.length || els.some((e, i) => grid.children[i] !== e)) replace(grid, els);
    empty.hidden = els.length > 0;
    replace(empty, "None of these jobs has reported a series yet.");
  }

  // Numeric fields of the jobs' latest step events: every series one of them reports.
  function reported(): string[] {
    const names = new Set<string>();
    for (const j of jobs) for (const [k, v] of Object.entries(j?.last_step ?? {})) if (k !== "step" && k !== "steps" && typeof v === "number") names.add(k);
    return [...names].sort((a, b) => groupRank(groupOf(a)) - groupRank(groupOf(b)) || a.localeCompare(b));
  }

  function renderMore(): void {
    const names = reported().filter((n) => !primary.includes(n));
    replace(
      moreList,
      names.map((n) =>
        h("button", { class: "series-toggle", "data-more": n, "aria-pressed": String(shown.includes(n)), onclick: () => void toggle(n) }, label(n)),
      ),
    );
  }

  async function toggle(name: string): Promise<void> {
    const at = shown.indexOf(name);
    if (at >= 0) shown.splice(at, 1);
    else {
      shown.push(name);
      try {
        await fetchSeries([name]);
      } catch (e) {
        msg.show(e);
      }
    }
    renderMore();
    draw();
  }

  async function fetchSeries(names: string[]): Promise<void> {
    if (!names.length) return;
    const answers = await Promise.all(
      ids.map((id, i) =>
        jobs[i]
          ? get<MetricsSeries>(withQuery(`/v1/jobs/${id}/metrics`, { names: names.join(","), max_points: kMaxPoints }))
          : Promise.resolve({ series: {} as SeriesMap }),
      ),
    );
    for (const name of names) {
      data.set(
        name,
        answers.map((a) => {
          const p: Points = { steps: [], times: [], values: [] };
          for (const [step, t, v] of a.series[name] ?? []) {
            if (typeof v !== "number") continue;
            p.steps.push(step);
            p.times.push(t);
            p.values.push(v);
          }
          return p;
        }),
      );
    }
  }

  function renderJobs(): void {
    replace(
      legend,
      ids.map((id, i) => {
        const j = jobs[i];
        return h(
          "span",
          { class: "compare-job", "data-job": id },
          h("span", { class: "swatch", style: `background:${kPalette[i % kPalette.length]}` }),
          h("a", { href: "/jobs/" + id }, "#" + id + (j ? " " + (j.name || "(unnamed)") : "")),
          j ? [h("span", { class: "chip" }, j.kind), " ", stateBadge(j.state)] : h("span", { class: "muted" }, " not found"),
        );
      }),
    );
    const found = jobs.filter((j): j is Job => j !== null);
    const rows = diffSpecs(jobs.map((j) => j?.spec ?? {}));
    replace(
      diffBody,
      found.length < 2
        ? h("tr", { class: "empty" }, h("td", { colspan: ids.length + 1 }, "Two jobs are needed to compare their specs."))
        : rows.length === 0
          ? h("tr", { class: "empty" }, h("td", { colspan: ids.length + 1 }, "Their specs are the same."))
          : rows.map((r) =>
              h(
                "tr",
                { "data-key": r.key },
                h("td", { class: "key" }, r.key),
                r.values.map((v) => h("td", { class: v === undefined ? "absent" : "" }, v ?? "—")),
              ),
            ),
    );
  }

  let primary: string[] = [];
  let loaded = false;
  async function refresh(): Promise<void> {
    const asked = performance.now();
    const got = await Promise.all(
      ids.map((id) =>
        get<Job>("/v1/jobs/" + id).catch((e) => {
          if (e instanceof ApiError && e.status === 404) return null;
          throw e;
        }),
      ),
    );
    got.forEach((j, i) => (jobs[i] = j));
    renderJobs();
    if (!loaded) {
      // The kinds' series, asked whether or not the latest step carried them (a success rate is
      // null in an update where no episode ended); those no job reports are not drawn.
      primary = [...new Set(jobs.flatMap((j) => (j ? primaryNames(j.kind) : [])))];
      if (primary.length === 0) primary = reported();
      shown.push(...primary);
      renderMore();
    }
    await fetchSeries(shown);
    const fetched = performance.now();
    draw();
    if (!loaded) {
      loaded = true;
      // Timings of the first drawing, read by the browser test and the benchmark.
      chartsEl.dataset.fetchMs = String(Math.round(fetched - asked));
      chartsEl.dataset.drawMs = String(Math.round(performance.now() - fetched));
      chartsEl.dataset.drawnAtMs = String(Math.round(performance.now()));
    }
    if (jobs.every((j) => !j || kTerminal.has(j.state))) poller.stop();
  }

  const el = h(
    "div",
    { class: "page compare" },
    h("div", { class: "crumbs" }, h("a", { href: "/jobs" }, "Jobs"), " / compare"),
    h("div", { class: "page-head" }, h("h1", null, "Compare jobs"), tabs),
    legend,
    msg.el,
    h("div", { class: "compare-layout" }, card("Series", chartsEl), card("Spec differences", h("div", { class: "table-scroll" }, diffTable))),
  );
  tabs.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t.id === "x-" + xMode));
  if (ids.length < 2) {
    msg.info("Pick two or more jobs to compare: tick them on the jobs page, or name them in the address (/compare?jobs=1,2).");
    return { title: "Compare", el };
  }
  const poller = poll(5000, refresh, (e) => msg.show(e));
  return {
    title: "Compare " + ids.map((id) => "#" + id).join(", "),
    el,
    dispose() {
      poller.stop();
      resize.disconnect();
      for (const c of charts.values()) c.plot?.destroy();
    },
  };
}
