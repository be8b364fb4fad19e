// The plan beside the submit form: as the JobSpec is edited, POST /v1/plan predicts, for each
// GPU count asked, the step and epoch time, throughput, memory per rank and what limits the step
// (compute, communication, data), and names the size past which adding GPUs stops paying
// (efficiency below 50%). The model and its parameters are docs/planner.md's; the cluster
// presets are the files in docs/plan/, bundled as they are, or a cluster the user pastes.
//
// Requests are debounced and numbered: an answer to an older edit never replaces a newer one.
// A 400 names its field: "gpus[i]" and "cluster.*" errors go next to those controls here;
// "job.*" errors are the JobSpec's own and are handed to the form (onJobError) to show next to
// the form field, exactly as a submission's would be.
import paperCluster from "../../docs/plan/paper-cluster.json";
import thisMachine from "../../docs/plan/this-machine.json";
import { ApiError, post } from "./api";
import { h, replace } from "./dom";
import { bytes, duration, num, percent } from "./format";
import type { Plan } from "./types";
import { emptyRow, table } from "./ui";

const kPresets: Record<string, { cluster: unknown; gpus: string; label: string }> = {
  "this-machine": { cluster: thisMachine, gpus: "1,2", label: "This machine (calibrated CPU)" },
  "paper-h100-rdma": { cluster: paperCluster, gpus: "256,512,1024", label: "Paper: H100, RDMA" },
};
const kDebounceMs = 350;

export interface PlanPanel {
  el: HTMLElement;
  // The form's current JobSpec (null: the JSON editor holds no valid object). Debounced.
  update(spec: Record<string, unknown> | null): void;
}

export function planPanel(onJobError: (field: string, message: string) => void, clearJobErrors: () => void): PlanPanel {
  const clusterSelect = h(
    "select",
    { id: "plan-cluster" },
    Object.entries(kPresets).map(([k, p]) => h("option", { value: k }, p.label)),
    h("option", { value: "custom" }, "Custom (paste JSON)"),
  );
  const clusterJson = h("textarea", { id: "plan-cluster-json", class: "json-editor small", rows: 8, spellcheck: "false", hidden: true });
  const clusterError = h("div", { class: "field-error", "data-error-for": "cluster", role: "alert" });
  const gpus = h("input", { id: "plan-gpus", type: "text", value: kPresets["this-machine"].gpus, "aria-describedby": "plan-gpus-hint" });
  const gpusError = h("div", { class: "field-error", "data-error-for": "gpus", role: "alert" });
  const status = h("div", { class: "muted", id: "plan-status", role: "status" });
  const summary = h("div", { id: "plan-summary" });
  const result = table(["GPUs", "Step", "Epoch", "Samples/s", "Eff.", "Mem/rank", "Limit"], "plan");
  result.el.id = "plan-table";
  result.body.append(emptyRow(7, "No plan yet."));
  let gpusEdited = false;
  let spec: Record<string, unknown> | null = null;
  let timer: number | undefined;
  let seq = 0;

  clusterSelect.addEventListener("change", () => {
    const preset = kPresets[clusterSelect.value];
    clusterJson.hidden = preset !== undefined;
    if (!preset && !clusterJson.value.trim()) clusterJson.value = JSON.stringify(thisMachine, null, 2);
    if (preset && !gpusEdited) gpus.value = preset.gpus;
    schedule();
  });
  clusterJson.addEventListener("input", schedule);
  gpus.addEventListener("input", () => {
    gpusEdited = true;
    schedule();
  });

  function schedule(): void {
    window.clearTimeout(timer);
    timer = window.setTimeout(() => void refresh(), kDebounceMs);
  }

  function clearErrors(): void {
    replace(clusterError);
    replace(gpusError);
    gpus.classList.remove("invalid");
    clusterJson.classList.remove("invalid");
  }

  // The GPU list as typed: integers the server checks; anything else is sent as typed so the
  // server's error names its position ("gpus[1]").
  function gpuList(): unknown[] {
    return gpus.value
      .split(/[\s,]+/)
      .filter(Boolean)
      .map((s) => (/^-?\d+$/.test(s) ? Number(s) : s));
  }

  async function refresh(): Promise<void> {
    const mine = ++seq;
    clearErrors();
    if (!spec) {
      replace(status, "The plan needs a JobSpec object.");
      return;
    }
    if (spec.kind !== "train") {
      replace(status, "Plans are made for train jobs.");
      replace(result.body, emptyRow(7, "No plan for this kind of job."));
      replace(summary);
      return;
    }
    let cluster: unknown;
    const preset = kPresets[clusterSelect.value];
    if (preset) cluster = preset.cluster;
    else {
      try {
        cluster = JSON.parse(clusterJson.value);
      } catch (e) {
        replace(clusterError, "Not valid JSON: " + (e as Error).message);
        clusterJson.classList.add("invalid");
        return;
      }
    }
    replace(status, "Planning…");
    try {
      const plan = await post<Plan>("/v1/plan", { job: spec, gpus: gpuList(), cluster });
      if (mine !== seq) return;
      clearJobErrors();
      show(plan);
      replace(status, "Predicted by the planner (docs/planner.md) for " + plan.cluster + ".");
    } catch (e) {
      if (mine !== seq) return;
      replace(result.body, emptyRow(7, "No plan: see the error."));
      replace(summary);
      replace(status);
      if (!(e instanceof ApiError) || e.status !== 400 || !e.field) {
        replace(status, "Plan unavailable: " + (e as Error).message);
        return;
      }
      if (e.field === "gpus" || e.field.startsWith("gpus[")) {
        replace(gpusError, e.field + ": " + e.message);
        gpus.classList.add("invalid");
      } else if (e.field.startsWith("cluster")) {
        replace(clusterError, e.field + ": " + e.message);
        clusterJson.classList.add("invalid");
      } else if (e.field.startsWith("job.")) {
        replace(status, "The JobSpec has an error: " + e.field.slice(4) + ".");
        onJobError(e.field.slice(4), e.message);
      } else replace(status, e.field + ": " + e.message);
    }
  }

  function show(plan: Plan): void {
    replace(
      result.body,
      plan.sizes.map((s) =>
        h(
          "tr",
          { "data-gpus": s.gpus, class: s.efficiency < 0.5 ? "inefficient" : "" },
          h("td", { title: `${s.nodes} node${s.nodes === 1 ? "" : "s"}` }, String(s.gpus)),
          h("td", { class: "step" }, stepTime(s.step_seconds)),
          h("td", null, s.epoch_seconds === null ? "—" : duration(s.epoch_seconds)),
          h("td", null, num(s.samples_per_s)),
          h("td", { class: "efficiency" }, percent(s.efficiency)),
          h("td", { class: s.fits_memory ? "" : "danger", title: s.fits_memory ? "" : "does not fit the rank's memory" }, bytes(s.memory_per_rank_bytes), s.fits_memory ? "" : " ✗"),
          h("td", { class: "bottleneck" }, s.bottleneck),
        ),
      ),
    );
    replace(
      summary,
      plan.efficiency_below_half_at_gpus === null
        ? `Adding GPUs pays at every size asked (efficiency ≥ 50% up to ${plan.efficient_up_to_gpus}).`
        : `Adding GPUs stops paying past ${plan.efficient_up_to_gpus}: efficiency falls below 50% at ${plan.efficiency_below_half_at_gpus}.`,
    );
  }

  const el = h(
    "section",
    { class: "card plan-panel", id: "plan", "aria-labelledby": "plan-title" },
    h("h2", { id: "plan-title" }, "Plan"),
    h(
      "div",
      { class: "inline-fields" },
      h("label", null, "Cluster", clusterSelect),
      h("label", null, "GPUs", gpus, h("span", { class: "hint", id: "plan-gpus-hint" }, "comma-separated")),
    ),
    gpusError,
    clusterJson,
    clusterError,
    status,
    h("div", { class: "table-scroll" }, result.el),
    summary,
  );
  return {
    el,
    update(s) {
      spec = s;
      schedule();
    },
  };
}

function stepTime(s: number): string {
  if (!Number.isFinite(s)) return "—";
  return s < 1 ? (s * 1000).toFixed(s < 0.01 ? 2 : 1) + " ms" : s.toFixed(2) + " s";
}
