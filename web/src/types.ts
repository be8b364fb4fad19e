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
}

export interface Tenant {
  id: number;
  name: string;
  weight: number;
  quota: Quota;
  usage: { slots_in_use: number; running_jobs: number; pending_jobs: number };
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
