// Live charts of every series a job reports, drawn by uPlot. Series are grouped by name alone,
// so fields a later engine adds are charted without a change here: *_seconds share the step-time
// breakdown, ratios and efficiencies share one chart, every other field gets its own. X is the
// step; charts share a cursor. Points arrive as GET /v1/jobs/{id}/metrics answers them
// ({"series":{name:[[step,time_ms,value],...]}}) and are appended by step.
import uPlot from "uplot";

import { h, replace } from "./dom";
import { num } from "./format";
import type { SeriesMap } from "./types";

const kPalette = ["#2456c7", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c", "#5c940d", "#495057"];
const kRatios = new Set(["packing_efficiency", "padding_ratio", "mfu"]);
const kFirst = ["loss", "tokens_per_s", "time", "ratio", "samples_per_s", "lr", "grad_norm"];
const kTitles: Record<string, string> = {
  loss: "Loss",
  tokens_per_s: "Tokens / s",
  samples_per_s: "Samples / s",
  time: "Step time breakdown (s)",
  ratio: "Efficiency (ratio)",
  lr: "Learning rate",
  grad_norm: "Gradient norm",
  world_size: "World size",
};

function groupOf(name: string): string {
  if (name.endsWith("_seconds")) return "time";
  if (kRatios.has(name) || name.endsWith("_ratio") || name.endsWith("_efficiency")) return "ratio";
  return name;
}

interface Points {
  steps: number[];
  values: number[];
}

interface Chart {
  names: string[];
  el: HTMLElement;
  plot: uPlot | null;
}

export class JobCharts {
  readonly el: HTMLElement;
  private readonly grid: HTMLElement;
  private readonly empty: HTMLElement;
  private readonly series = new Map<string, Points>();
  private readonly charts = new Map<string, Chart>();
  private readonly resize: ResizeObserver;
  private readonly sync = "job-" + Math.random().toString(36).slice(2);

  constructor() {
    this.grid = h("div", { class: "charts" });
    this.empty = h("p", { class: "muted" }, "No metrics reported yet.");
    this.el = h("div", null, this.empty, this.grid);
    this.resize = new ResizeObserver(() => this.fit());
    this.resize.observe(this.grid);
  }

  // The last step charted, for the next incremental read (since = lastStep + 1).
  lastStep(): number | null {
    let last: number | null = null;
    for (const p of this.series.values()) {
      const s = p.steps[p.steps.length - 1];
      if (s !== undefined && (last === null || s > last)) last = s;
    }
    return last;
  }

  // Adds points; those at or before a series' last step are already charted and skipped.
  add(map: SeriesMap): void {
    let changed = false;
    for (const [name, pts] of Object.entries(map)) {
      // `steps` is the job's planned total, the same number at every step: not a series.
      if (name === "steps" || !Array.isArray(pts) || pts.length === 0) continue;
      let s = this.series.get(name);
      if (!s) this.series.set(name, (s = { steps: [], values: [] }));
      const last = s.steps.length ? s.steps[s.steps.length - 1] : -Infinity;
      for (const p of pts) {
        if (p[0] > last && typeof p[2] === "number") {
          s.steps.push(p[0]);
          s.values.push(p[2]);
          changed = true;
        }
      }
    }
    if (changed) this.draw();
  }

  dispose(): void {
    this.resize.disconnect();
    for (const c of this.charts.values()) c.plot?.destroy();
  }

  private draw(): void {
    const groups = new Map<string, string[]>();
    for (const name of [...this.series.keys()].sort()) {
      const g = groupOf(name);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g)!.push(name);
    }
    const order = [...groups.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    for (const g of order) {
      const names = groups.get(g)!;
      let c = this.charts.get(g);
      if (c && c.names.join() !== names.join()) {
        c.plot?.destroy();
        c.plot = null;
      }
      if (!c) {
        c = { names, el: h("div", { class: "chart", "data-series": g }), plot: null };
        this.charts.set(g, c);
      }
      c.names = names;
      const data = this.aligned(names);
      c.el.dataset.points = String(names.reduce((n, name) => n + this.series.get(name)!.values.length, 0));
      if (c.plot) c.plot.setData(data);
      else c.plot = this.make(g, names, data, c.el);
    }
    // Keep the DOM order stable and as sorted.
    const els = order.map((g) => this.charts.get(g)!.el);
    if (els.some((e, i) => this.grid.children[i] !== e)) replace(this.grid, els);
    this.empty.hidden = this.series.size > 0;
  }

  private aligned(names: string[]): uPlot.AlignedData {
    if (names.length === 1) {
      const s = this.series.get(names[0])!;
      return [s.steps, s.values];
    }
    const steps = new Set<number>();
    for (const n of names) for (const x of this.series.get(n)!.steps) steps.add(x);
    const xs = Float64Array.from(steps).sort();
    const index = new Map<number, number>();
    xs.forEach((x, i) => index.set(x, i));
    const ys = names.map((n) => {
      const s = this.series.get(n)!;
      const y: (number | null)[] = new Array(xs.length).fill(null);
      s.steps.forEach((x, i) => (y[index.get(x)!] = s.values[i]));
      return y;
    });
    return [Array.from(xs), ...ys];
  }

  private make(group: string, names: string[], data: uPlot.AlignedData, el: HTMLElement): uPlot {
    const opts: uPlot.Options = {
      title: kTitles[group] ?? label(group),
      width: this.width(),
      height: 200,
      cursor: { sync: { key: this.sync }, drag: { x: true, y: false } },
      scales: { x: { time: false } },
      legend: { show: true, live: true },
      axes: [
        { label: "step", labelSize: 18, size: 36, stroke: "#555", grid: { stroke: "#eee" } },
        { size: 56, stroke: "#555", grid: { stroke: "#eee" }, values: (_, ticks) => ticks.map((v) => num(v)) },
      ],
      series: [
        { label: "step" },
        ...names.map((n, i) => ({
          label: label(n),
          stroke: kPalette[i % kPalette.length],
          width: 1.5,
          spanGaps: true,
          points: { show: false },
          value: (_: uPlot, v: number | null) => (v === null ? "—" : num(v)),
        })),
      ],
    };
    return new uPlot(opts, data, el);
  }

  private width(): number {
    const w = this.grid.clientWidth || 1200;
    const cols = w > 900 ? 2 : 1;
    return Math.floor((w - (cols - 1) * 16) / cols) - 2;
  }

  private fit(): void {
    const width = this.width();
    for (const c of this.charts.values()) if (c.plot && Math.abs(c.plot.width - width) > 2) c.plot.setSize({ width, height: 200 });
  }
}

function rank(group: string): number {
  const i = kFirst.indexOf(group);
  return i < 0 ? kFirst.length : i;
}

function label(name: string): string {
  return name.replace(/_/g, " ");
}
