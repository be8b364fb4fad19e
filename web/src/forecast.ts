// Forecasts in the dashboard (docs/contracts.md, "Forecasts"): beside the submit form, as the
// JobSpec is edited, POST /v1/jobs?dry_run=true says whether the job would be admitted (or the
// refusal a submission would get), where it would be placed now, when it is predicted to start
// and for how long it would run, and why it would wait; nothing is stored. A job's page shows
// GET /v1/jobs/{id}/forecast the same way, and how the forecast made at submission came out.
//
// Dry runs are debounced and numbered, as the plan's are (plan.ts): an answer to an older edit
// never replaces a newer one.
import { ApiError, post } from "./api";
import { h, replace } from "./dom";
import { duration, time } from "./format";
import type { Forecast, StoredForecast } from "./types";

const kDebounceMs = 400;

// Where a predicted run time comes from: every value the document allows, so a new one fails tsc.
const kRunTimeSource: Record<NonNullable<Forecast["run_time_source"]>, string> = {
  planner: "the planner's step time × steps",
  history: "its time limit × the share of their limits recent jobs ran for",
  time_limit: "its time limit",
};

// The forecast as a list: start, placement, run time, end, jobs ahead, reasons.
export function forecastView(f: Forecast): HTMLElement[] {
  const rows: [string, string, string][] = []; // [key, label, value]
  if (f.predicted_start !== undefined || f.starts_now !== undefined) {
    rows.push([
      "start",
      "Starts",
      f.starts_now
        ? "now (the next scheduling cycle)"
        : f.predicted_start
          ? `${time(f.predicted_start)} (in ${duration(f.predicted_wait_seconds ?? 0)})`
          : "unknown",
    ]);
  }
  if (f.started_at) rows.push(["started", "Started", time(f.started_at)]);
  if (f.placement !== undefined) {
    rows.push([
      "placement",
      "Placement",
      f.placement
        ? f.placement.nodes.map((n) => `${n.node || "node " + n.node_id} (${n.ranks} rank${n.ranks === 1 ? "" : "s"}, ${n.slots} ${f.placement!.slot_type})`).join(", ")
        : "none yet",
    ]);
  }
  rows.push([
    "run",
    "Run time",
    f.predicted_run_seconds === null
      ? "unknown"
      : `${duration(f.predicted_run_seconds)}${f.run_time_source ? ` (${kRunTimeSource[f.run_time_source]})` : ""}`,
  ]);
  rows.push(["end", "Ends", f.predicted_end ? time(f.predicted_end) : "unknown"]);
  if (f.jobs_ahead !== undefined) rows.push(["ahead", "Jobs ahead", String(f.jobs_ahead)]);
  const out: HTMLElement[] = [h("dl", { class: "kv forecast-kv" }, rows.flatMap(([k, l, v]) => [h("dt", null, l), h("dd", { "data-forecast": k }, v)]))];
  if (f.reasons.length) out.push(h("ul", { class: "reasons" }, f.reasons.map((r) => h("li", null, r))));
  return out;
}

// How the forecast made at submission came out (actual minus predicted).
export function storedForecastView(f: StoredForecast, startedAt: string | null, finishedAt: string | null): HTMLElement {
  const off = (s: number | null) => (s === null ? "" : ` (actual ${s >= 0 ? "+" : "−"}${duration(Math.abs(s))} ${s >= 0 ? "later" : "earlier"})`);
  return h(
    "dl",
    { class: "kv", id: "submitted-forecast" },
    h("dt", null, "Forecast at"),
    h("dd", null, time(f.made_at)),
    h("dt", null, "Predicted start"),
    h("dd", { "data-forecast": "submitted-start" }, f.predicted_start ? time(f.predicted_start) : "unknown", startedAt ? off(f.start_error_seconds) : ""),
    h("dt", null, "Predicted run time"),
    h("dd", null, f.predicted_run_seconds === null ? "unknown" : duration(f.predicted_run_seconds)),
    h("dt", null, "Predicted end"),
    h("dd", { "data-forecast": "submitted-end" }, f.predicted_end ? time(f.predicted_end) : "unknown", finishedAt ? off(f.end_error_seconds) : ""),
  );
}

export interface ForecastPanel {
  el: HTMLElement;
  // The form's current JobSpec (null: the JSON editor holds no valid object). Debounced.
  update(spec: Record<string, unknown> | null): void;
}

export function forecastPanel(): ForecastPanel {
  const status = h("div", { id: "forecast-status", class: "forecast-status", role: "status" }, "No forecast yet.");
  const body = h("div", { id: "forecast-body" });
  let spec: Record<string, unknown> | null = null;
  let timer: number | undefined;
  let seq = 0;

  async function refresh(): Promise<void> {
    const mine = ++seq;
    if (!spec) {
      status.className = "forecast-status";
      replace(status, "The forecast needs a JobSpec object.");
      replace(body);
      return;
    }
    try {
      const f = await post<Forecast>("/v1/jobs?dry_run=true", spec);
      if (mine !== seq) return;
      status.className = "forecast-status admitted";
      status.dataset.admitted = "1";
      replace(status, "Would be admitted", f.starts_now ? " and start now." : f.predicted_start ? " and wait." : "; its start cannot be predicted.");
      replace(body, forecastView(f));
    } catch (e) {
      if (mine !== seq) return;
      replace(body);
      if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 401 && e.status !== 429) {
        status.className = "forecast-status refused";
        status.dataset.admitted = "0";
        replace(status, "Would be refused: ", e.field ? h("code", null, e.field) : null, e.field ? ": " : "", e.message);
      } else {
        status.className = "forecast-status";
        delete status.dataset.admitted;
        replace(status, "Forecast unavailable: " + (e as Error).message);
      }
    }
  }

  const el = h(
    "section",
    { class: "card forecast-panel", id: "forecast", "aria-labelledby": "forecast-title" },
    h("h2", { id: "forecast-title" }, "Forecast"),
    status,
    body,
    h("p", { class: "muted small" }, "The scheduler's own decision run forward over the queue now (a dry run: nothing is submitted)."),
  );
  return {
    el,
    update(s) {
      spec = s;
      window.clearTimeout(timer);
      timer = window.setTimeout(() => void refresh(), kDebounceMs);
    },
  };
}
