// Shapes of the REST API's JSON, named from the types openapi-typescript generates out of
// docs/api/openapi.yaml into api.gen.ts at build time (`npm run gen:api`, or the embody-web
// target): a page that reads a field the document does not declare fails tsc, so the dashboard
// and the document cannot drift apart. Only what is the dashboard's own (orderings, the sets of
// final states, the session it keeps without a server answer) is written here by hand.
import type { components } from "./api.gen";

type Schemas = components["schemas"];

export type JobState = Schemas["JobState"];

// The order the pages list states in.
export const kJobStates: JobState[] = [
  "PENDING",
  "SCHEDULED",
  "RUNNING",
  "RESTARTING",
  "CANCELLING",
  "SUCCEEDED",
  "FAILED",
  "CANCELLED",
];
export const kTerminal = new Set<string>(["SUCCEEDED", "FAILED", "CANCELLED"] satisfies JobState[]);

export type Job = Schemas["Job"];
// The data of the job's latest step event: the engine's figures, named or not in the document.
export type LastStep = NonNullable<Job["last_step"]>;
export type JobPage = Schemas["JobList"];
export type JobEvent = Schemas["Event"];
export type JobEventList = Schemas["EventList"];

// GET /v1/jobs/{id}/metrics: name -> [[step, time_ms, value], ...]
export type SeriesMap = Schemas["MetricsSeries"]["series"];
export type MetricsSeries = Schemas["MetricsSeries"];

export type NodeInfo = Schemas["Node"];
export type NodeList = Schemas["NodeList"];

export type Quota = Schemas["TenantLimits"];
export type Tenant = Schemas["Tenant"];
export type TenantList = Schemas["TenantList"];
export type TenantUsage = Schemas["TenantUsage"];

export type Token = Schemas["Token"];
export type TokenList = Schemas["TokenList"];
export type TokenCreated = Schemas["TokenCreated"];

export type AuditEntry = Schemas["AuditEntry"];
export type AuditPage = Schemas["AuditPage"];

// Who the dashboard takes the user to be: the server's answer to GET /v1/whoami or, from a
// server that has no such route, a token it checked on another route with its role unknown.
export type Whoami = Schemas["WhoAmI"] | { token_id: null; tenant_id: null; tenant: ""; role: "unknown"; name: "" };

// A forecast (docs/contracts.md, "Forecasts"): POST /v1/jobs?dry_run=true answers one with
// `dry_run` and `admitted`; GET /v1/jobs/{id}/forecast with `job_id`, `state` and
// `submitted_forecast`, and for a job holding slots only the run and end fields.
export type Forecast = Schemas["Forecast"];
// The forecast made for a submitted job, and actual minus predicted (seconds) once known.
export type StoredForecast = NonNullable<Schemas["StoredForecast"]>;

// POST /v1/plan.
export type Plan = Schemas["Plan"];
export type PlanSize = Schemas["PlanSize"];

// GET /v1/jobs/{id}/evaluation: an eval job's results per task (docs/eval.md).
export type Evaluation = Schemas["Evaluation"];

// Pipelines (docs/pipelines.md): a tenant's DAG of steps, each a job, an import or a gate.
export type Pipeline = Schemas["Pipeline"];
export type PipelinePage = Schemas["PipelineList"];
export type PipelineState = Pipeline["state"];
export type PipelineStep = Schemas["PipelineStep"];
export type PipelineStepState = PipelineStep["state"];
// POST /v1/pipelines?dry_run=true (docs/pipelines.md, "Dry run").
export type PipelineDryRun = Schemas["PipelineDryRun"];
// A step as submitted (the part of `spec` the page reads: a gate's `when`).
export type PipelineStepSpec = Schemas["PipelineSubmit"]["steps"][number];
// What a judged gate compared, and one side of it (an eval step's metric).
export type PipelineGate = NonNullable<PipelineStep["gate"]>;
export type GateMetric = Schemas["GateMetric"];

export const kPipelineTerminal = new Set<string>(["succeeded", "failed", "cancelled"] satisfies PipelineState[]);
export const kStepFinal = new Set<string>(["succeeded", "failed", "gate_failed", "skipped", "cancelled"] satisfies PipelineStepState[]);
