// One pipeline: its steps as a layered DAG (../dag.ts: state, attempts, each step's job), what
// every gate compared (and, for a gate that failed, which values, in one sentence), each step's
// reason, the spec as submitted, and cancel for roles that may. Refreshed every 2 s while it is
// live, once more after it ends, then left alone (as a job page is).
import { ApiError, get, post } from "../api";
import { dagView } from "../dag";
import { h, replace, type Child } from "../dom";
import { age, duration, time, value as num } from "../format";
import { poll } from "../poll";
import type { Page } from "../router";
import { can } from "../session";
import { kPipelineTerminal, type GateMetric, type Pipeline, type PipelineGate, type PipelineStep, type PipelineStepSpec } from "../types";
import { card, emptyRow, messageBox, progress, stat, stateBadge, table } from "../ui";

const metricText = (m: GateMetric) => `${m.step} ${m.metric}${m.task ? " (" + m.task + ")" : ""}`;
const jobLink = (id: number | undefined) => (id ? h("a", { href: "/jobs/" + id }, "job #" + id) : null);

// "Gate fp8-gate failed: eval-fp8 success_rate 0.5 (job #17) is below 0.51 = eval-bc
// success_rate 0.54 (job #15) − 0.03."
export function gateSentence(step: string, g: PipelineGate): Child[] {
  const out: Child[] = [h("strong", null, `Gate ${step} ${g.passed ? "passed" : "failed"}: `), metricText(g), " "];
  out.push(g.value === null ? "had no results" : num(g.value), " (", jobLink(g.job_id), ")");
  if (g.value !== null) out.push(g.passed ? " is at least " : " is below ", num(g.threshold));
  if (g.reference) {
    out.push(g.value === null ? "; threshold " : " = ", metricText(g.reference), " ", num(g.reference.value));
    out.push(" (", jobLink(g.reference.job_id), ") − ", num(g.minus ?? 0));
  } else if (g.value !== null) out.push(" (a fixed threshold)");
  out.push(".");
  return out;
}

export function pipelinePage(params: Record<string, string>): Page {
  const id = Number(params.id);
  const msg = messageBox();
  const cancelMsg = messageBox();
  let pipeline: Pipeline | null = null;
  let drawn = "";
  let confirming = false; // "Cancel this pipeline?" is on screen

  const title = h("h1", null, "Pipeline #" + id);
  const badges = h("div", { class: "badges" });
  const actions = h("div", { class: "actions" });
  const reason = h("div", { class: "reason-box", hidden: true });
  const gateFailed = h("div", { class: "reason-box state-failed", id: "gate-failed", hidden: true });
  const stats = h("div", { class: "stats" });
  const dagBox = h("div", { id: "pipeline-dag" }, h("p", { class: "muted" }, "Loading…"));
  const gates = table(["Gate", "Value", "Threshold", "Reference", "Margin", "Passed"], "gates");
  const gatesCard = card("Gates", gates.el);
  gatesCard.hidden = true;
  const stepsTable = table(["Step", "Kind", "State", "Needs", "Attempts", "Jobs", "Started", "Finished", "Reason"], "steps");
  const specPre = h("pre", { class: "json", id: "pipeline-spec" });

  const live = () => !!pipeline && !kPipelineTerminal.has(pipeline.state);

  function render(p: Pipeline): void {
    replace(title, p.name, h("span", { class: "muted id" }, " #" + p.id));
    replace(badges, stateBadge(p.state), h("span", { class: "chip" }, p.tenant), h("span", { class: "chip" }, p.steps.length + " steps"));
    reason.hidden = !p.reason;
    replace(reason, h("strong", null, kPipelineTerminal.has(p.state) ? "Outcome: " : "Note: "), p.reason);
    reason.className = "reason-box state-" + p.state;
    const succeeded = p.steps.filter((s) => s.state === "succeeded").length;
    const end = p.finished_at ? Date.parse(p.finished_at) : Date.now();
    replace(
      stats,
      stat("Steps succeeded", progress(succeeded, p.steps.length)),
      stat("Running", String(p.steps.filter((s) => s.state === "running").length)),
      stat("Jobs", String(p.steps.reduce((n, s) => n + s.jobs.length, 0))),
      stat("Runtime", duration((end - Date.parse(p.created_at)) / 1000)),
      stat("Created", age(p.created_at) + " ago"),
      stat("Finished", p.finished_at ? time(p.finished_at) : "—"),
    );
    if (!confirming || p.state !== "running") renderActions(p);

    // The DAG and tables only when a step changed: a poll that finds nothing new leaves them be.
    const key = JSON.stringify(p.steps);
    if (key !== drawn) {
      drawn = key;
      replace(dagBox, p.steps.length ? dagView(p.steps) : h("p", { class: "muted" }, "No steps."));
      renderGates(p);
      renderSteps(p.steps);
    }
    const spec = JSON.stringify(p.spec ?? {}, null, 2);
    if (specPre.textContent !== spec) specPre.textContent = spec;
  }

  // Cancel for roles that may while it runs; a poll does not take away the question once asked.
  function renderActions(p: Pipeline): void {
    confirming = false;
    replace(
      actions,
      can.submit() && p.state === "running"
        ? h("button", { class: "btn danger", id: "cancel-pipeline", onclick: () => confirmCancel() }, "Cancel pipeline")
        : null,
      can.submit() ? h("a", { class: "btn", href: "/pipelines?new=1&from=" + p.id, id: "resubmit-pipeline" }, "Submit a copy") : null,
    );
  }

  function renderGates(p: Pipeline): void {
    const specs = new Map<string, PipelineStepSpec>((p.spec?.steps ?? []).map((s) => [s.name, s]));
    const gated = p.steps.filter((s) => s.gate || specs.get(s.name)?.when);
    gatesCard.hidden = gated.length === 0;
    replace(
      gates.body,
      gated.map((s) => {
        const g = s.gate;
        if (!g) {
          // Not judged yet: what it will compare, from the spec.
          const w = specs.get(s.name)!.when!;
          const ref = typeof w.at_least === "number" ? null : w.at_least;
          return h(
            "tr",
            { "data-gate": s.name },
            h("td", { class: "name" }, s.name),
            h("td", null, `${w.step} ${w.metric}`, h("span", { class: "muted" }, " (not judged yet)")),
            h("td", { class: "num" }, typeof w.at_least === "number" ? num(w.at_least) : "—"),
            h("td", null, ref ? `${ref.step} ${ref.metric}` : "—"),
            h("td", { class: "num" }, ref ? num(ref.minus ?? 0) : "—"),
            h("td", null, stateBadge(s.state)),
          );
        }
        return h(
          "tr",
          { "data-gate": s.name, "data-passed": String(g.passed) },
          h("td", { class: "name" }, s.name),
          h("td", { class: "num gate-value" }, num(g.value), " ", h("span", { class: "muted" }, metricText(g), " · "), jobLink(g.job_id)),
          h("td", { class: "num gate-threshold" }, num(g.threshold)),
          h("td", { class: "gate-reference" }, g.reference ? [num(g.reference.value), " ", h("span", { class: "muted" }, metricText(g.reference), " · "), jobLink(g.reference.job_id)] : h("span", { class: "muted" }, "a fixed threshold")),
          h("td", { class: "num gate-margin" }, g.minus === undefined ? "—" : num(g.minus)),
          h("td", { class: "gate-passed" }, h("span", { class: "badge state-" + (g.passed ? "succeeded" : "failed") }, g.passed ? "passed" : "failed")),
        );
      }),
    );
    const failed = p.steps.filter((s) => s.state === "gate_failed");
    gateFailed.hidden = failed.length === 0;
    replace(
      gateFailed,
      failed.map((s) => h("div", { "data-gate": s.name }, s.gate ? gateSentence(s.name, s.gate) : [h("strong", null, `Gate ${s.name} failed: `), s.reason])),
    );
  }

  function renderSteps(steps: PipelineStep[]): void {
    replace(
      stepsTable.body,
      steps.length === 0
        ? emptyRow(9, "No steps.")
        : steps.map((s) =>
            h(
              "tr",
              { "data-step": s.name },
              h("td", { class: "name" }, s.name),
              h("td", null, s.kind ?? "gate"),
              h("td", null, stateBadge(s.state)),
              h("td", null, s.needs.join(", ") || "—"),
              h("td", { class: "num" }, s.retries ? `${s.attempts} of ${s.retries + 1}` : String(s.attempts)),
              h("td", { class: "nowrap" }, s.jobs.length ? s.jobs.flatMap((j, i) => [i ? ", " : "", h("a", { href: "/jobs/" + j }, "#" + j)]) : s.dataset_id ? "dataset #" + s.dataset_id : "—"),
              h("td", { class: "nowrap" }, time(s.started_at)),
              h("td", { class: "nowrap" }, time(s.finished_at)),
              h("td", { class: "reason", title: s.reason }, s.reason),
            ),
          ),
    );
  }

  function confirmCancel(): void {
    confirming = true;
    replace(
      actions,
      h("span", null, "Cancel this pipeline and its running jobs?"),
      h("button", { class: "btn danger", id: "confirm-cancel-pipeline", onclick: () => void cancel() }, "Yes, cancel"),
      h("button", { class: "btn", onclick: () => pipeline && renderActions(pipeline) }, "Keep running"),
    );
  }

  async function cancel(): Promise<void> {
    try {
      cancelMsg.show(null);
      pipeline = await post<Pipeline>(`/v1/pipelines/${id}/cancel`);
      confirming = false;
      render(pipeline);
      poller.now();
    } catch (e) {
      cancelMsg.show(e);
      confirming = false;
      if (pipeline) render(pipeline);
    }
  }

  let finalRound = false;
  const poller = poll(
    2000,
    async () => {
      pipeline = await get<Pipeline>("/v1/pipelines/" + id);
      render(pipeline);
      dagBox.dataset.ready = "1";
      if (!live()) {
        if (finalRound) poller.stop();
        finalRound = true;
      }
    },
    (e) => {
      if (e instanceof ApiError && e.status === 404) poller.stop();
      msg.show(e);
    },
  );

  const el = h(
    "div",
    { class: "page pipeline" },
    h("div", { class: "crumbs" }, h("a", { href: "/pipelines" }, "Pipelines"), " / #" + id),
    h("div", { class: "page-head" }, h("div", null, title, badges), actions),
    msg.el,
    cancelMsg.el,
    reason,
    gateFailed,
    stats,
    card("Steps", h("p", { class: "muted small" }, "Left to right in the order their needs allow; a line runs from a step to each step that needs it."), dagBox),
    gatesCard,
    card("Step details", stepsTable.el),
    card("Spec", specPre),
  );
  return { title: "Pipeline #" + id, el, dispose: () => poller.stop() };
}
