// The staleness histogram of the asynchronous-RL health panel: how many of an update's steps
// were acted by a policy 0, 1, … versions behind the learner (the step event's `staleness`,
// {"0": n, "1": m}, engine/rl/async_ppo.h), for the latest update the job reported. The
// panel's other figures are step series, charted by charts.ts.
import { h, replace } from "./dom";
import { num } from "./format";
import type { LastStep } from "./types";

export class StalenessHistogram {
  readonly el: HTMLElement;
  private readonly body: HTMLElement;
  private readonly caption: HTMLElement;

  constructor() {
    this.caption = h("div", { class: "muted small" });
    this.body = h("div", { class: "histogram", role: "img" });
    this.el = h("div", { class: "staleness", id: "staleness-histogram", hidden: true }, h("div", { class: "histogram-title" }, "Staleness histogram"), this.body, this.caption);
  }

  // From the job's latest step event; hidden when it carries no histogram (a synchronous run).
  update(last: LastStep | null | undefined): void {
    const hist = last?.staleness;
    if (!hist || typeof hist !== "object" || Array.isArray(hist)) {
      this.el.hidden = true;
      return;
    }
    const buckets = Object.entries(hist as Record<string, unknown>)
      .filter(([k, v]) => /^\d+$/.test(k) && typeof v === "number")
      .map(([k, v]) => [Number(k), v as number] as const)
      .sort((a, b) => a[0] - b[0]);
    const total = buckets.reduce((n, [, v]) => n + v, 0);
    const key = JSON.stringify(buckets) + last?.step;
    if (this.el.dataset.key === key) return;
    this.el.dataset.key = key;
    this.el.hidden = buckets.length === 0;
    this.body.setAttribute("aria-label", buckets.map(([b, v]) => `${b} behind: ${v} steps`).join("; "));
    replace(
      this.body,
      buckets.map(([b, v]) => {
        const share = total > 0 ? v / total : 0;
        return h(
          "div",
          { class: "hist-row", "data-behind": b, "data-steps": v },
          h("span", { class: "hist-label" }, b === 0 ? "fresh (0)" : `${b} behind`),
          h("span", { class: "bar" }, h("span", { class: "fill", style: `width:${(share * 100).toFixed(1)}%` })),
          h("span", { class: "hist-value" }, `${num(v)} steps · ${(share * 100).toFixed(0)}%`),
        );
      }),
    );
    replace(this.caption, `Steps of the update at step ${last?.step ?? "—"}, by how many policy versions the acting policy was behind the learner's.`);
  }
}
