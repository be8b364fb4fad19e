// Live charts of a job's step series, drawn by uPlot (plot.ts), laid out by the job's kind
// (panels.ts): the kind's panels first, in sections, each drawn once one of its series has
// points; every other series a job reports is listed under "more series" and drawn when picked
// (groups as panels.ts names them: fields a later engine adds are listed without a change
// here). A job of a kind without a layout draws every group at once. X is the step; charts
// share a cursor. Points arrive as GET /v1/jobs/{id}/metrics answers them
// ({"series":{name:[[step,time_ms,value],...]}}) and are appended by step.
import uPlot from "uplot";

import { h, replace } from "./dom";
import { groupOf, groupRank, groupTitle, label, type PanelDef, type Section } from "./panels";
import { align, chartWidth, kChartHeight, makePlot } from "./plot";
import type { SeriesMap } from "./types";

interface Points {
  steps: number[];
  values: number[];
}

interface Chart {
  names: string[];
  el: HTMLElement; // .chart, the plot's parent
  box: HTMLElement; // the chart and its notes
  notes: HTMLElement;
  plot: uPlot | null;
}

interface SectionView {
  def: Section;
  el: HTMLElement;
  grid: HTMLElement;
  note: HTMLElement;
}

export interface ChartOptions {
  open?: string[]; // "more series" groups drawn from the start
  onOpen?(open: string[]): void; // the groups drawn changed (the page keeps them in its URL)
  leads?: Record<string, HTMLElement>; // shown at the top of a section (by its id)
  empty?: Record<string, string>; // a section's note when it has no points (by its id)
}

export class JobCharts {
  readonly el: HTMLElement;
  private readonly empty: HTMLElement;
  private readonly sections: SectionView[];
  private readonly moreEl: HTMLElement;
  private readonly moreList: HTMLElement;
  private readonly moreGrid: HTMLElement;
  private readonly open: Set<string>;
  private readonly series = new Map<string, Points>();
  private readonly charts = new Map<string, Chart>();
  private readonly resize: ResizeObserver;
  private readonly sync = "job-" + Math.random().toString(36).slice(2);

  // `layout`: the kind's sections (panels.ts sectionsFor); null: every series drawn.
  constructor(
    private readonly layout: Section[] | null,
    private readonly options: ChartOptions = {},
  ) {
    this.open = new Set(options.open ?? []);
    this.empty = h("p", { class: "muted" }, "No metrics reported yet.");
    this.sections = (layout ?? []).map((def) => {
      const grid = h("div", { class: "charts" });
      const note = h("p", { class: "muted section-note", hidden: true });
      const lead = options.leads?.[def.id] ?? null;
      const el = h("div", { class: "panel-section", "data-section": def.id, hidden: true }, def.title ? h("h3", null, def.title) : null, lead, note, grid);
      return { def, el, grid, note };
    });
    this.moreList = h("div", { class: "more-list", role: "group", "aria-label": "More series" });
    this.moreGrid = h("div", { class: "charts" });
    this.moreEl = h("div", { class: "more", id: "more-series", hidden: true }, h("h3", null, "More series"), this.moreList, this.moreGrid);
    this.el = h("div", { class: "job-charts" }, this.empty, this.sections.map((s) => s.el), this.moreEl);
    this.resize = new ResizeObserver(() => this.fit());
    this.resize.observe(this.el);
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

  // A section's note while it has no points, e.g. once the page knows the job's spec.
  setEmptyNote(section: string, text: string): void {
    (this.options.empty ??= {})[section] = text;
    this.draw();
  }

  // Lays the sections out again after a lead element changed (shown, hidden).
  redraw(): void {
    this.draw();
  }

  dispose(): void {
    this.resize.disconnect();
    for (const c of this.charts.values()) c.plot?.destroy();
  }

  private draw(): void {
    const assigned = new Set<string>();
    for (const s of this.sections) for (const p of s.def.panels) for (const n of p.names) assigned.add(n);

    for (const s of this.sections) {
      const els: HTMLElement[] = [];
      for (const p of s.def.panels) {
        const present = p.names.filter((n) => this.series.has(n));
        if (present.length) els.push(this.chart(p.id, p, present));
      }
      syncChildren(s.grid, els);
      const note = els.length ? "" : this.options.empty?.[s.def.id] ?? "";
      s.note.hidden = !note;
      replace(s.note, note);
      const lead = this.options.leads?.[s.def.id];
      s.el.hidden = !els.length && !note && (!lead || lead.hidden);
    }

    const groups = new Map<string, string[]>();
    for (const name of [...this.series.keys()].sort()) {
      if (assigned.has(name)) continue;
      const g = groupOf(name);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g)!.push(name);
    }
    const order = [...groups.keys()].sort((a, b) => groupRank(a) - groupRank(b) || a.localeCompare(b));
    const all = this.layout === null;
    const shown = order.filter((g) => all || this.open.has(g));
    syncChildren(
      this.moreGrid,
      shown.map((g) => this.chart("more:" + g, { id: g, title: groupTitle(g), names: groups.get(g)! }, groups.get(g)!)),
    );
    this.moreEl.hidden = order.length === 0;
    this.moreEl.classList.toggle("all", all);
    if (!all) {
      const key = order.map((g) => g + (this.open.has(g) ? "+" : "-") + groups.get(g)!.length).join();
      if (this.moreList.dataset.key !== key) {
        this.moreList.dataset.key = key;
        replace(
          this.moreList,
          order.map((g) =>
            h(
              "button",
              {
                class: "series-toggle",
                "data-more": g,
                "aria-pressed": String(this.open.has(g)),
                title: groups.get(g)!.map(label).join(", "),
                onclick: () => this.toggle(g),
              },
              groupTitle(g),
            ),
          ),
        );
      }
    }
    this.empty.hidden = this.series.size > 0;
  }

  private toggle(group: string): void {
    if (this.open.has(group)) this.open.delete(group);
    else this.open.add(group);
    this.draw();
    this.options.onOpen?.([...this.open]);
  }

  // The chart `key` drawing `names`, made or brought up to date.
  private chart(key: string, def: PanelDef, names: string[]): HTMLElement {
    let c = this.charts.get(key);
    if (c && c.names.join() !== names.join()) {
      c.plot?.destroy();
      c.plot = null;
    }
    if (!c) {
      const el = h("div", { class: "chart", "data-series": def.id });
      const notes = h("div", { class: "chart-notes muted small" });
      c = { names, el, box: h("div", { class: "chart-box" }, el, notes), notes, plot: null };
      this.charts.set(key, c);
    }
    c.names = names;
    const pts = names.map((n) => this.series.get(n)!);
    const data = align(
      pts.map((p) => p.steps),
      pts.map((p) => p.values),
    );
    c.el.dataset.points = String(pts.reduce((n, p) => n + p.values.length, 0));
    c.el.dataset.names = names.join(",");
    if (c.plot) c.plot.setData(data);
    else {
      c.plot = makePlot(
        { title: def.title, labels: names.map(label), xLabel: "step", width: this.width(), sync: this.sync, range: def.range },
        data,
        c.el,
      );
    }
    const missing = Object.entries(def.missing ?? {}).filter(([n]) => !names.includes(n));
    replace(c.notes, missing.map(([, text]) => h("div", null, text)));
    return c.box;
  }

  private width(): number {
    return chartWidth(this.el.clientWidth);
  }

  private fit(): void {
    const width = this.width();
    for (const c of this.charts.values()) if (c.plot && Math.abs(c.plot.width - width) > 2) c.plot.setSize({ width, height: kChartHeight });
  }
}

// Makes `el`'s children exactly `els`, in order, touching the DOM only when they differ.
function syncChildren(el: HTMLElement, els: HTMLElement[]): void {
  if (els.length !== el.children.length || els.some((e, i) => el.children[i] !== e)) replace(el, els);
}
