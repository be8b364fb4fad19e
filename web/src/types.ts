// Shapes of the REST API's JSON (docs/contracts.md). Fields a newer server adds are tolerated;
// fields an older one lacks are optional here.

export type JobState =
  | "PENDING"
  | "SCHEDULED"
  | "RUNNING"
  | "SUCCEEDED"
  | "FAILED"
  | "CANCELLED"
  | "CANCELLING"
  | "RESTARTING";

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
export const kTerminal = new Set<string>(["SUCCEEDED", "FAILED", "CANCELLED"]);

export interface LastStep {
  step?: number;
  steps?: number;
  loss?: number;
  tokens_per_s?: number;
  [name: string]: unknown;
}

export interface Job {
  id: number;
  tenant: string;
  name: string;
  kind: string;
  state: JobState;
  reason: string;
  priority: number;
  spec: Record<string, unknown>;
  attempt: number;
  exit_code: number | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
  allocation: { node_id: number; node: string; ranks: number }[];
  last_step: LastStep | null;
  latest_checkpoint: { path: string; step: number; bytes: number } | null;
  // The forecast stored when the job was first seen pending, and how far off it came out.
  forecast?: StoredForecast | null;
  // GET /v1/jobs/{id} of a job a pipeline submitted: its pipeline, step and attempt (from 1).
  pipeline?: { id: number; name: string; step: string; attempt: number };
}

export interface JobPage {
  jobs: Job[];
  next_cursor: string | null;
}

export interface JobEvent {
  id: number;
  time: string;
  type: string;
  data: Record<string, unknown>;
}

// name -> [[step, time_ms, value], ...]
export type SeriesMap = Record<string, [number, number, number][]>;

export interface GpuInfo {
  index?: number;
  name?: string;
  memory_bytes?: number;
  utilization?: number;
  [k: string]: unknown;
}

export interface NodeInfo {
  id: number;
  name: string;
  address: string;
  state: string;
  draining?: boolean;
  cpu_slots: number;
  gpus: GpuInfo[];
  memory_bytes: number;
  slots_used: number;
  last_heartbeat: string;
  // Utilisation, where the server reports it (0..1).
  cpu_utilization?: number;
  gpu_utilization?: number;
}

export interface Quota {
  slots: number | null;
  running_jobs: number | null;
  pending_jobs: number | null;
  nodes_per_job: number | null;
  max_priority: number | null;
  // Bytes of datasets (images included) and checkpoints together.
  storage_bytes: number | null;
}

export interface Tenant {
  id: number;
  name: string;
  weight: number;
  quota: Quota;
  usage: { slots_in_use: number; running_jobs: number; pending_jobs: number; storage_bytes?: number };
  version: number;
  created_at: string;
}

export interface UsageDay {
  day: string;
  slot_type: string;
  slot_seconds: number;
  token_id: number | null;
  token_name: string | null;
}

export interface Token {
  id: number;
  tenant_id: number;
  tenant: string;
  role: string;
  name: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
}

export interface AuditEntry {
  id: number;
  time: string;
  actor: string;
  role: string;
  tenant: string;
  method: string;
  route: string;
  target: string;
  status: number;
  request_id: string;
}

export interface Whoami {
  token_id: number | null;
  tenant_id: number | null;
  tenant: string;
  role: string;
  name: string;
}

// A forecast (docs/contracts.md, "Forecasts"): POST /v1/jobs?dry_run=true answers one with
// `dry_run` and `admitted`; GET /v1/jobs/{id}/forecast with `job_id`, `state` and
// `submitted_forecast`, and for a job holding slots only the run and end fields.
export interface Forecast {
  dry_run?: boolean;
  admitted?: boolean;
  job_id?: number;
  state?: JobState;
  made_at: string;
  started_at?: string | null;
  starts_now?: boolean;
  predicted_start?: string | null;
  predicted_wait_seconds?: number | null;
  predicted_run_seconds: number | null;
  run_time_source: "planner" | "time_limit" | null;
  predicted_end: string | null;
  placement?: { slot_type: string; nodes: { node_id: number; node: string; ranks: number; slots: number }[] } | null;
  jobs_ahead?: number;
  reasons: string[];
  submitted_forecast?: StoredForecast | null;
}

// POST /v1/pipelines?dry_run=true (docs/pipelines.md, "Dry run"): each step's job forecast as if
// submitted now, and its expected start and end down the DAG; null where not predicted.
export interface PipelineDryRun {
  dry_run: boolean;
  admitted: boolean;
  name: string;
  made_at: string;
  predicted_end: string | null;
  steps: {
    name: string;
    needs: string[];
    kind: string;
    forecast?: Forecast;
    predicted_start: string | null;
    predicted_end: string | null;
    not_predicted?: string;
  }[];
}

// The forecast made for a submitted job, and actual minus predicted (seconds) once known.
export interface StoredForecast {
  made_at: string;
  predicted_start: string | null;
  predicted_run_seconds: number | null;
  predicted_end: string | null;
  start_error_seconds: number | null;
  end_error_seconds: number | null;
}

// GET /v1/jobs/{id}/evaluation: an eval job's results per task (docs/eval.md).
export interface EvaluationTask {
  task: string;
  episodes: number;
  successes: number;
  success_rate: number;
  mean_return: number;
  mean_length: number;
  checkpoint_step: number;
  policy: string;
  fp8: boolean;
  evaluated_at: string;
}
export interface Evaluation {
  job_id: number;
  tasks: EvaluationTask[];
}

// Pipelines (docs/pipelines.md): a tenant's DAG of steps, each a job, an import or a gate.
export type PipelineState = "running" | "cancelling" | "succeeded" | "failed" | "cancelled";
export type PipelineStepState = "pending" | "running" | "succeeded" | "failed" | "gate_failed" | "skipped" | "cancelled";
export const kPipelineTerminal = new Set<string>(["succeeded", "failed", "cancelled"]);
export const kStepFinal = new Set<string>(["succeeded", "failed", "gate_failed", "skipped", "cancelled"]);

// One side of a gate's comparison: an eval step's metric, read from the job it ran.
export interface GateMetric {
  step: string;
  metric: string;
  task?: string;
  job_id: number;
  value: number | null; // null: its results never arrived
}

// What a judged gate compared: value >= threshold, the threshold a number (`at_least`) or the
// reference's value minus `minus`.
export interface PipelineGate extends GateMetric {
  threshold: number | null;
  reference?: GateMetric;
  minus?: number;
  passed: boolean;
}

export interface PipelineStep {
  name: string;
  state: PipelineStepState;
  reason: string;
  kind: string | null; // the job's kind, "import", or null for a gate alone
  needs: string[];
  retries: number;
  attempts: number;
  jobs: number[]; // the job of each attempt
  job_id: number | null; // the latest attempt's
  dataset_id?: number; // an import step's dataset version
  gate: PipelineGate | null;
  started_at: string | null;
  finished_at: string | null;
}

// A step as submitted (the part of `spec` the page reads: a gate's `when`).
export interface PipelineStepSpec {
  name: string;
  needs?: string[];
  retries?: number;
  when?: { step: string; metric: string; task?: string; at_least: number | { step: string; metric: string; task?: string; minus?: number } };
  job?: Record<string, unknown>;
  import?: Record<string, unknown>;
}

export interface Pipeline {
  id: number;
  tenant_id: number;
  tenant: string;
  name: string;
  state: PipelineState;
  reason: string;
  steps: PipelineStep[];
  spec?: { name: string; steps: PipelineStepSpec[] }; // GET /v1/pipelines/{id} and POST only
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface PipelinePage {
  pipelines: Pipeline[];
  next_cursor: string | null;
}
