// The one way the dashboard draws a line chart (uPlot): shared axes and legend style, a width
// that follows the CSS grid the chart sits in, and the alignment of several series that were
// sampled at different x onto one x array (uPlot's data shape), gaps spanned.
import uPlot from "uplot";

import { num } from "./format";

export const kPalette = ["#2456c7", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c", "#5c940d", "#495057"];
const kMinChart = 560; // .charts { grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)) }
const kGap = 16;
export const kChartHeight = 200;

export interface PlotOptions {
  title: string;
  labels: string[]; // one per y series
  xLabel: string;
  width: number;
  sync: string; // charts with the same key share a cursor
  range?: [number, number];
}

export function makePlot(o: PlotOptions, data: uPlot.AlignedData, el: HTMLElement): uPlot {
  const opts: uPlot.Options = {
    title: o.title,
    width: o.width,
    height: kChartHeight,
    cursor: { sync: { key: o.sync }, drag: { x: true, y: false } },
    scales: { x: { time: false }, ...(o.range ? { y: { range: o.range } } : {}) },
    legend: { show: true, live: true },
    axes: [
      { label: o.xLabel, labelSize: 18, size: 36, stroke: "#555", grid: { stroke: "#eee" } },
      { size: 56, stroke: "#555", grid: { stroke: "#eee" }, values: (_, ticks) => ticks.map((v) => num(v)) },
    ],
    series: [
      { label: o.xLabel },
      ...o.labels.map((l, i) => ({
        label: l,
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

// The width of one chart in a grid `width` pixels wide, as the CSS lays the grid out.
export function chartWidth(width: number): number {
  const w = width || 1200;
  const cols = Math.max(1, Math.floor((w + kGap) / (kMinChart + kGap)));
  return Math.floor((w - (cols - 1) * kGap) / cols) - 2;
}

// Series i is (xs[i], ys[i]), xs ascending. One x array for all, each y null where its series
// has no point at that x.
export function align(xs: ArrayLike<number>[], ys: ArrayLike<number>[]): uPlot.AlignedData {
  if (xs.length === 1) return [Array.from(xs[0]), Array.from(ys[0])];
  let same = xs.every((x) => x.length === xs[0].length);
  for (let i = 1; same && i < xs.length; i++) for (let k = 0; same && k < xs[0].length; k++) same = xs[i][k] === xs[0][k];
  if (same) return [Array.from(xs[0]), ...ys.map((y) => Array.from(y))];
  const all = new Set<number>();
  for (const x of xs) for (let k = 0; k < x.length; k++) all.add(x[k]);
  const union = Float64Array.from(all).sort();
  const index = new Map<number, number>();
  union.forEach((x, i) => index.set(x, i));
  const out: (number | null)[][] = ys.map((y, i) => {
    const row: (number | null)[] = new Array(union.length).fill(null);
    const x = xs[i];
    for (let k = 0; k < x.length; k++) row[index.get(x[k])!] = y[k];
    return row;
  });
  return [Array.from(union), ...out];
}
