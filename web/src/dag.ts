// A pipeline's steps drawn as its DAG, in layers: a step's column is the length of the longest
// chain of `needs` before it (roots first, left to right), and within a column steps sit near
// the steps they need (the mean row of their needs), so most edges run straight. Every box has
// the same size, so the layout and the SVG lines of `needs` are computed here, without reading
// the page back; nothing to lay out again on resize. Not a general graph layout: 64 steps at
// most (the server's limit), in the spec's order where nothing else decides.
import { h } from "./dom";
import { value as num } from "./format";
import { kStepFinal, type PipelineStep } from "./types";
import { stateBadge } from "./ui";

const kW = 224; // box width
const kH = 100; // box height
const kGapX = 56;
const kGapY = 14;
const kPad = 8;
const kSvg = "http://www.w3.org/2000/svg";

// name -> column: 0 for a step that needs nothing, else one more than its deepest need. The
// server refuses cycles; a name it does not know (never: it checks) counts as a root.
export function depths(steps: PipelineStep[]): Map<string, number> {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const depth = new Map<string, number>();
  const visit = (name: string, seen: Set<string>): number => {
    const known = depth.get(name);
    if (known !== undefined) return known;
    const s = byName.get(name);
    if (!s || seen.has(name)) return 0;
    seen.add(name);
    const d = s.needs.reduce((m, n) => Math.max(m, visit(n, seen) + 1), 0);
    seen.delete(name);
    depth.set(name, d);
    return d;
  };
  for (const s of steps) visit(s.name, new Set());
  return depth;
}

// Columns of step names, each ordered by the mean row of its steps' needs (spec order on ties).
export function layers(steps: PipelineStep[]): string[][] {
  const depth = depths(steps);
  const cols: string[][] = [];
  for (const s of steps) (cols[depth.get(s.name) ?? 0] ??= []).push(s.name);
  const row = new Map<string, number>();
  const needs = new Map(steps.map((s) => [s.name, s.needs]));
  cols.forEach((col, c) => {
    if (c > 0) {
      const key = (n: string) => {
        const rows = (needs.get(n) ?? []).map((x) => row.get(x)).filter((r): r is number => r !== undefined);
        return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : Infinity;
      };
      const order = new Map(col.map((n, i) => [n, i]));
      col.sort((a, b) => key(a) - key(b) || order.get(a)! - order.get(b)!);
    }
    col.forEach((n, i) => row.set(n, i));
  });
  return cols.map((c) => c ?? []);
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(kSvg, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

// What a step's box says under its state: its job (each attempt's), its dataset, or its gate.
function stepLinks(s: PipelineStep): HTMLElement {
  const parts: (HTMLElement | string)[] = [];
  if (s.job_id !== null) {
    parts.push(h("a", { href: "/jobs/" + s.job_id, class: "step-job", "data-job": s.job_id }, "job #" + s.job_id));
    const earlier = s.jobs.slice(0, -1);
    if (earlier.length) parts.push(h("span", { class: "muted" }, " (earlier: "), ...earlier.flatMap((j, i) => [i ? ", " : "", h("a", { href: "/jobs/" + j, class: "step-job-earlier" }, "#" + j)]), h("span", { class: "muted" }, ")"));
  }
  if (s.dataset_id) parts.push(h("span", { class: "muted" }, (parts.length ? " · " : "") + "dataset #" + s.dataset_id));
  if (s.gate) {
    const g = s.gate;
    parts.push(
      h(
        "span",
        { class: "gate-line " + (g.passed ? "passed" : "failed") },
        (parts.length ? " · " : "") + `gate ${num(g.value)} ${g.passed ? "≥" : "<"} ${num(g.threshold)}`,
      ),
    );
  }
  if (!parts.length) parts.push(h("span", { class: "muted" }, kStepFinal.has(s.state) ? "no job" : s.kind === null ? "gate, not judged yet" : "no job yet"));
  return h("div", { class: "step-links" }, parts);
}

export function dagView(steps: PipelineStep[]): HTMLElement {
  const cols = layers(steps);
  const at = new Map<string, { x: number; y: number }>();
  cols.forEach((col, c) => col.forEach((n, r) => at.set(n, { x: kPad + c * (kW + kGapX), y: kPad + r * (kH + kGapY) })));
  const width = 2 * kPad + cols.length * (kW + kGapX) - kGapX;
  const height = 2 * kPad + Math.max(1, ...cols.map((c) => c.length)) * (kH + kGapY) - kGapY;
  const state = new Map(steps.map((s) => [s.name, s.state]));

  const lines = svg("svg", { class: "dag-edges", width, height, viewBox: `0 0 ${width} ${height}`, "aria-hidden": "true" });
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "dag-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", class: "dag-arrow" }));
  defs.append(marker);
  lines.append(defs);
  for (const s of steps) {
    const to = at.get(s.name)!;
    for (const need of s.needs) {
      const from = at.get(need);
      if (!from) continue;
      const x1 = from.x + kW, y1 = from.y + kH / 2, x2 = to.x, y2 = to.y + kH / 2;
      const mid = (x1 + x2) / 2;
      lines.append(
        svg("path", {
          d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2 - 1},${y2}`,
          class: "dag-edge from-" + (state.get(need) ?? "pending"),
          "data-from": need,
          "data-to": s.name,
          "marker-end": "url(#dag-arrow)",
        }),
      );
    }
  }

  const boxes = steps.map((s) => {
    const p = at.get(s.name)!;
    const tries = s.retries > 0 ? `attempt ${s.attempts} of ${s.retries + 1}` : s.attempts ? `attempt ${s.attempts}` : "";
    return h(
      "div",
      {
        class: "dag-step state-" + s.state,
        "data-step": s.name,
        "data-state": s.state,
        "data-depth": String(cols.findIndex((c) => c.includes(s.name))),
        style: `left:${p.x}px;top:${p.y}px;width:${kW}px;height:${kH}px`,
        title: (s.needs.length ? "needs " + s.needs.join(", ") + "\n" : "") + (s.reason || ""),
      },
      h("div", { class: "step-head" }, h("span", { class: "step-name" }, s.name), h("span", { class: "chip" }, s.kind ?? "gate")),
      h("div", { class: "step-state" }, stateBadge(s.state), tries ? h("span", { class: "muted small attempts" }, tries) : null),
      stepLinks(s),
      h("div", { class: "step-reason muted small" }, s.reason),
    );
  });
  return h("div", { class: "dag-scroll" }, h("div", { class: "dag", style: `width:${width}px;height:${height}px` }, lines, boxes));
}
