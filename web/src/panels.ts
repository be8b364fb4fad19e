// Which series a job page opens on, by the job's kind; everything else a job reports stays in
// the "more series" list, one click away. The names are the step-event fields the engine
// reports (api/job_event_check.cc); a panel is drawn only once one of its series has points,
// so nothing here invents a series a job does not send. Kinds without a layout (command,
// import: whatever a program reports) open on every series, as before panels existed.

export interface PanelDef {
  id: string; // the chart's data-series attribute
  title: string;
  names: string[]; // drawn together, in this order
  range?: [number, number]; // a fixed y range (shares)
  // Said under the chart while the named series has no points.
  missing?: Record<string, string>;
}

export interface Section {
  id: string;
  title?: string;
  panels: PanelDef[];
  // Said when none of the section's series has points (e.g. a synchronous rl job).
  empty?: string;
}

// engine.eval_every's closed-loop evaluation (docs/eval.md), where a job asks for it.
const kEvalEvery: PanelDef = { id: "eval_success_rate", title: "Evaluation success rate", names: ["eval_success_rate"], range: [0, 1] };

const kTrain: Section[] = [
  {
    id: "main",
    panels: [
      { id: "loss", title: "Loss", names: ["loss"] },
      { id: "tokens_per_s", title: "Tokens / s", names: ["tokens_per_s"] },
      {
        id: "step_time",
        title: "Step time against the plan (s)",
        names: ["step_seconds", "predicted_step_seconds"],
        missing: {
          predicted_step_seconds:
            "No planned step time: the server runs without --plan-cluster, or the planner cannot model this job (docs/planner.md).",
        },
      },
      { id: "data_wait", title: "Data wait (s)", names: ["data_wait_seconds"] },
      kEvalEvery,
    ],
  },
];

// The figures of the asynchronous levels (engine/rl/async_ppo.h); a synchronous run has none.
export const kRlHealth: Section = {
  id: "rl-health",
  title: "Asynchronous RL health",
  panels: [
    { id: "staleness", title: "Staleness (versions behind)", names: ["staleness_mean", "staleness_max"] },
    { id: "idle", title: "Idle share", names: ["actor_idle_share", "learner_idle_share"], range: [0, 1] },
    { id: "inference_batch", title: "Inference batch (requests per inference)", names: ["inference_batch"] },
    { id: "importance_capped", title: "Importance weights capped (share of steps)", names: ["importance_capped"], range: [0, 1] },
  ],
};

const kRl: Section[] = [
  {
    id: "main",
    panels: [
      { id: "success_rate", title: "Success rate", names: ["success_rate"], range: [0, 1] },
      { id: "mean_return", title: "Return (episode mean)", names: ["mean_return"] },
      { id: "env_steps_per_s", title: "Env steps / s", names: ["env_steps_per_s"] },
      kEvalEvery,
    ],
  },
  kRlHealth,
];

// null: no layout, every series opens.
export function sectionsFor(kind: string): Section[] | null {
  if (kind === "train") return kTrain;
  if (kind === "rl") return kRl;
  if (kind === "eval") return [];
  return null;
}

// The series a comparison opens on: each series of the kind's panels, one chart each.
export function primaryNames(kind: string): string[] {
  return (sectionsFor(kind) ?? []).flatMap((s) => s.panels.flatMap((p) => p.names));
}

// Whether an rl spec switches on an asynchronous level (docs/rl.md).
export function isAsyncRl(spec: Record<string, unknown>): boolean {
  const rl = ((spec.engine as Record<string, unknown> | undefined)?.rl ?? {}) as Record<string, unknown>;
  return ["disaggregated", "env_async", "streaming"].some((k) => rl[k] !== undefined && rl[k] !== null);
}

// Series grouped in "more series": *_seconds share the step-time breakdown, ratios and
// efficiencies share one chart, every other field is its own.
const kRatios = new Set(["packing_efficiency", "padding_ratio", "mfu"]);
export function groupOf(name: string): string {
  if (name.endsWith("_seconds")) return "time";
  if (kRatios.has(name) || name.endsWith("_ratio") || name.endsWith("_efficiency")) return "ratio";
  return name;
}
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
export function groupRank(group: string): number {
  const i = kFirst.indexOf(group);
  return i < 0 ? kFirst.length : i;
}
export function groupTitle(group: string): string {
  return kTitles[group] ?? label(group);
}
export function label(name: string): string {
  return name.replace(/_/g, " ");
}
