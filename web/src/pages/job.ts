// One job: what it is (spec), where it stands (state, why it waits and until when, restarts),
// how it trains (live charts, opening on the series of its kind: panels.ts; every other one a
// click away), what it prints (logs of every rank), what it left (checkpoints, evaluation, an
// eval job's success per task), and cancel for roles that may.
import { ApiError, get, post, withQuery } from "../api";
import { JobCharts } from "../charts";
import { h, replace } from "../dom";
import { forecastView, storedForecastView } from "../forecast";
import { age, bytes, duration, num, percent, time } from "../format";
import { LogPanel } from "../logs";
import { isAsyncRl, kRlHealth, sectionsFor } from "../panels";
import { poll } from "../poll";
import { setQuery, type Page } from "../router";
import { StalenessHistogram } from "../rl_health";
import { can } from "../session";
import { kTerminal, type Evaluation, type Forecast, type Job, type JobEvent, type JobEventList, type MetricsSeries } from "../types";
import { card, emptyRow, messageBox, progress, stat, stateBadge, table } from "../ui";

export function jobPage(params: Record<string, string>, query: URLSearchParams): Page {
  const id = Number(params.id);
  const msg = messageBox();
  let job: Job | null = null;
  let jobLoaded: () => void = () => {};
  const firstJob = new Promise<void>((resolve) => (jobLoaded = resolve));

  const title = h("h1", null, "Job #" + id);
  const badges = h("div", { class: "badges" });
  const actions = h("div", { class: "actions" });
  const stats = h("div", { class: "stats" });
  const reason = h("div", { class: "reason-box", hidden: true });
  const specPre = h("pre", { class: "json", id: "spec" });
  // Made once the job's kind is known (the first answer), and drawn in `chartsBox`.
  let charts: JobCharts | null = null;
  const chartsBox = h("div", { id: "metrics" }, h("p", { class: "muted" }, "Loading metrics…"));
  const histogram = new StalenessHistogram();
  const forecastBody = h("div", { id: "job-forecast" });
  const forecastCard = card("Forecast", forecastBody);
  forecastCard.hidden = true;
  let forecastAskedAt = 0;
  const evalTasks = table(["Task", "Success", "Successes", "Mean return", "Mean length", "Policy"], "eval-tasks");
  const evalCard = card("Success per task", evalTasks.el);
  evalCard.id = "success-per-task";
  evalCard.hidden = true;
  let evaluation: Evaluation | null = null;
  const timeline = table(["Time", "Change", "Reason", "By"], "timeline");
  const checkpoints = table(["Step", "Path", "Size", "Written"], "checkpoints");
  const evalBox = h("div", { id: "evaluation" }, h("p", { class: "muted" }, "No evaluation reported."));
  const events = { state: [] as JobEvent[], checkpoint: [] as JobEvent[], eval: [] as JobEvent[] };
  const after = { state: 0, checkpoint: 0, eval: 0 };
  const cancelMsg = messageBox();

  const isTerminal = () => !!job && kTerminal.has(job.state);

  async function refreshJob(): Promise<void> {
    job = await get<Job>("/v1/jobs/" + id);
    if (!charts) makeCharts(job);
    renderJob(job);
    jobLoaded();
    await Promise.all([refreshForecast(job), refreshEvaluation(job)]);
  }

  function makeCharts(j: Job): void {
    const layout = sectionsFor(j.kind);
    charts = new JobCharts(layout, {
      open: (query.get("more") ?? "").split(",").filter(Boolean),
      onOpen(open) {
        const q = new URLSearchParams(location.search);
        if (open.length) q.set("more", open.join(","));
        else q.delete("more");
        setQuery(q);
      },
      leads: { [kRlHealth.id]: histogram.el },
      empty: {
        [kRlHealth.id]: isAsyncRl(j.spec)
          ? "No asynchronous-RL figures reported yet."
          : "A synchronous run: no staleness, idle shares or capped weights to show (engine.rl.disaggregated, env_async or streaming switch the asynchronous levels on: docs/rl.md).",
      },
    });
    replace(chartsBox, charts.el);
  }

  // A live job's forecast now (every few seconds: each is a forward run of the scheduler on the
  // server); an ended one's, as made at its submission and how it came out.
  async function refreshForecast(j: Job): Promise<void> {
    const stored = j.forecast ? storedForecastView(j.forecast, j.started_at, j.finished_at) : null;
    if (kTerminal.has(j.state)) {
      forecastCard.hidden = !stored;
      replace(forecastBody, stored ? [h("h3", null, "At submission"), stored] : null);
      return;
    }
    if (Date.now() - forecastAskedAt < 5000) return;
    forecastAskedAt = Date.now();
    try {
      const f = await get<Forecast>(`/v1/jobs/${id}/forecast`);
      const sub = f.submitted_forecast ? storedForecastView(f.submitted_forecast, j.started_at, j.finished_at) : stored;
      replace(
        forecastBody,
        h("h3", null, j.state === "PENDING" ? "When it is predicted to start" : "When it is predicted to end"),
        forecastView(f),
        sub ? [h("h3", null, "At submission"), sub] : null,
      );
      forecastCard.hidden = false;
    } catch {
      // Ended since (409), or no forecast to be had now: the stored one, if any. Whether the
      // server answers at all is the job's read to report.
      forecastCard.hidden = !stored;
      replace(forecastBody, stored ? [h("h3", null, "At submission"), stored] : null);
    }
  }

  // An eval job's results, until they have arrived.
  async function refreshEvaluation(j: Job): Promise<void> {
    if (j.kind !== "eval" || (evaluation && evaluation.tasks.length)) return;
    evaluation = await get<Evaluation>(`/v1/jobs/${id}/evaluation`);
    evalCard.hidden = false;
    replace(
      evalTasks.body,
      evaluation.tasks.length === 0
        ? emptyRow(6, kTerminal.has(j.state) ? "No results were reported." : "No results yet: they arrive when the evaluation ends.")
        : evaluation.tasks.map((t) =>
            h(
              "tr",
              { "data-task": t.task },
              h("td", { class: "name" }, t.task),
              h("td", { class: "success" }, h("div", { class: "progress" }, h("div", { class: "bar" }, h("div", { class: "fill", style: `width:${(t.success_rate * 100).toFixed(1)}%` })), h("span", { class: "label" }, percent(t.success_rate)))),
              h("td", { class: "num" }, `${t.successes} / ${t.episodes}`),
              h("td", { class: "num" }, num(t.mean_return)),
              h("td", { class: "num" }, num(t.mean_length)),
              h("td", null, t.policy + (t.fp8 ? " (FP8)" : ""), t.checkpoint_step ? ` at step ${t.checkpoint_step}` : ""),
            ),
          ),
    );
  }

  async function refreshEvents(): Promise<void> {
    for (const type of ["state", "checkpoint", "eval"] as const) {
      for (;;) {
        const r = await get<JobEventList>(withQuery(`/v1/jobs/${id}/events`, { type, after: after[type], limit: 500 }));
        if (r.events.length === 0) break;
        events[type].push(...r.events);
        after[type] = r.events[r.events.length - 1].id;
        if (r.events.length < 500) break;
      }
    }
    renderEvents();
  }

  async function refreshMetrics(): Promise<void> {
    const last = charts?.lastStep() ?? null;
    const asked = performance.now();
    const r = await get<MetricsSeries>(
      withQuery(`/v1/jobs/${id}/metrics`, last === null ? { max_points: 2000 } : { since: last + 1, max_points: 1000 }),
    );
    const got = performance.now();
    await firstJob; // asked together; the layout needs the job's kind
    const ready = performance.now();
    charts!.add(r.series);
    if (last === null && !chartsBox.dataset.drawnAtMs) {
      // Timings of the first chart drawing, read by the browser test and the benchmark.
      chartsBox.dataset.fetchMs = String(Math.round(got - asked));
      chartsBox.dataset.drawMs = String(Math.round(performance.now() - ready));
      chartsBox.dataset.drawnAtMs = String(Math.round(performance.now()));
    }
  }

  function renderJob(j: Job): void {
    replace(title, j.name || "(unnamed)", h("span", { class: "muted id" }, " #" + j.id));
    replace(
      badges,
      stateBadge(j.state),
      h("span", { class: "chip" }, j.tenant),
      h("span", { class: "chip" }, j.kind),
      h("span", { class: "chip" }, "priority " + j.priority),
      // Submitted by a pipeline: back to it, naming the step and attempt.
      j.pipeline
        ? h("a", { class: "chip", id: "job-pipeline", href: "/pipelines/" + j.pipeline.id }, "pipeline " + j.pipeline.name + " · " + j.pipeline.step + (j.pipeline.attempt > 1 ? " (attempt " + j.pipeline.attempt + ")" : ""))
        : null,
    );
    const end = j.finished_at ? Date.parse(j.finished_at) : Date.now();
    const runtime = j.started_at ? duration((end - Date.parse(j.started_at)) / 1000) : "—";
    replace(
      stats,
      stat("Progress", progress(j.last_step?.step, j.last_step?.steps)),
      stat("Tokens / s", num(j.last_step?.tokens_per_s)),
      stat("Loss", num(j.last_step?.loss)),
      stat("Runtime", runtime),
      stat("Waited", j.wait_seconds === null ? "—" : duration(j.wait_seconds)),
      stat("Attempt", String(j.attempt + 1)),
      stat("Exit code", j.exit_code === null ? "—" : String(j.exit_code)),
      stat("Nodes", j.allocation.length ? j.allocation.map((a) => a.node).join(", ") : "—"),
      stat("Created", age(j.created_at) + " ago"),
    );
    reason.hidden = !j.reason;
    replace(reason, h("strong", null, isTerminal() ? "Outcome: " : j.state === "PENDING" ? "Waiting: " : "Note: "), j.reason);
    reason.className = "reason-box state-" + j.state.toLowerCase();
    if (j.kind === "rl") {
      histogram.update(j.last_step);
      charts?.redraw();
    }
    const text = JSON.stringify(j.spec, null, 2);
    if (specPre.textContent !== text) specPre.textContent = text;
    replace(
      actions,
      can.submit() && !isTerminal() && j.state !== "CANCELLING"
        ? h("button", { class: "btn danger", id: "cancel-job", onclick: () => confirmCancel() }, "Cancel job")
        : null,
      can.submit() ? h("a", { class: "btn", href: "/submit?from=" + j.id, id: "resubmit" }, "Submit a copy") : null,
    );
  }

  function confirmCancel(): void {
    replace(
      actions,
      h("span", null, "Cancel this job?"),
      h("button", { class: "btn danger", id: "confirm-cancel", onclick: () => void cancel() }, "Yes, cancel"),
      h("button", { class: "btn", onclick: () => job && renderJob(job) }, "Keep running"),
    );
  }

  async function cancel(): Promise<void> {
    try {
      cancelMsg.show(null);
      job = await post<Job>(`/v1/jobs/${id}/cancel`);
      renderJob(job);
      poller.now();
    } catch (e) {
      cancelMsg.show(e);
      if (job) renderJob(job);
    }
  }

  function renderEvents(): void {
    replace(
      timeline.body,
      events.state.length === 0
        ? emptyRow(4, "No state changes yet.")
        : events.state
            .slice()
            .reverse()
            .map((e) => {
              const d = e.data as { from?: string; to?: string; reason?: string; actor?: string };
              return h(
                "tr",
                null,
                h("td", { class: "nowrap" }, time(e.time)),
                h("td", { class: "nowrap" }, d.from ? [stateBadge(d.from), " → "] : null, d.to ? stateBadge(d.to) : null),
                h("td", null, d.reason ?? ""),
                h("td", null, d.actor ?? ""),
              );
            }),
    );
    replace(
      checkpoints.body,
      events.checkpoint.length === 0
        ? emptyRow(4, "No checkpoints yet.")
        : events.checkpoint
            .slice()
            .reverse()
            .map((e) =>
              h(
                "tr",
                null,
                h("td", { class: "num" }, String(e.data.step ?? "—")),
                h("td", { class: "path" }, String(e.data.path ?? "")),
                h("td", { class: "num" }, bytes(e.data.bytes)),
                h("td", { class: "nowrap" }, time(e.time)),
              ),
            ),
    );
    if (events.eval.length) {
      replace(
        evalBox,
        events.eval.map((e) =>
          h(
            "dl",
            { class: "kv" },
            Object.entries(e.data).filter(([k]) => k !== "type" && k !== "time_ms").flatMap(([k, v]) => [h("dt", null, k.replace(/_/g, " ")), h("dd", null, typeof v === "number" ? num(v) : JSON.stringify(v))]),
          ),
        ),
      );
    }
  }

  // Job, events and metrics together; once the job has ended one more round reads what arrived
  // with the end, and polling stops.
  let finalRound = false;
  const poller = poll(
    2000,
    async () => {
      await Promise.all([refreshJob(), refreshEvents(), refreshMetrics()]);
      if (isTerminal()) {
        if (finalRound) poller.stop();
        finalRound = true;
      }
    },
    (e) => {
      if (e instanceof ApiError && e.status === 404) poller.stop();
      msg.show(e);
    },
  );
  const logs = new LogPanel(id, async () => {
    try {
      return kTerminal.has((await get<Job>("/v1/jobs/" + id)).state);
    } catch {
      return false;
    }
  });

  const el = h(
    "div",
    { class: "page job" },
    h("div", { class: "crumbs" }, h("a", { href: "/jobs" }, "Jobs"), " / #" + id),
    h("div", { class: "page-head" }, h("div", null, title, badges), actions),
    msg.el,
    cancelMsg.el,
    reason,
    stats,
    forecastCard,
    evalCard,
    card("Metrics", chartsBox),
    card("Logs", logs.el),
    h("div", { class: "two" }, card("State timeline", timeline.el), card("Checkpoints", checkpoints.el)),
    h("div", { class: "two" }, card("Evaluation", evalBox), card("Spec", specPre)),
  );
  return {
    title: "Job #" + id,
    el,
    dispose() {
      poller.stop();
      logs.dispose();
      charts?.dispose();
    },
  };
}
