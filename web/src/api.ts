// The one way the dashboard talks to embody-server: JSON over fetch with the session's bearer
// token. Every failure becomes an ApiError carrying the server's error body
// ({"error":{"code","message","field"}}) or, when the server cannot be reached, status 0.
// Whether the server is reachable is tracked here so the page can say "reconnecting" and every
// poller keeps going until it answers again (a server restart needs no reload).

export class ApiError extends Error {
  constructor(
    readonly status: number, // 0: no answer
    readonly code: string,
    message: string,
    readonly field: string = "",
    readonly requestId: string = "",
  ) {
    super(message);
  }
  get unreachable(): boolean {
    return this.status === 0 || this.status === 502 || this.status === 503 || this.status === 504;
  }
}

const kTokenKey = "embody.token";

export function token(): string {
  return sessionStorage.getItem(kTokenKey) ?? "";
}
export function setToken(t: string): void {
  if (t) sessionStorage.setItem(kTokenKey, t);
  else sessionStorage.removeItem(kTokenKey);
}

type Listener = () => void;
const reachabilityListeners: Listener[] = [];
const unauthorizedListeners: Listener[] = [];
let reachable = true;

export function isReachable(): boolean {
  return reachable;
}
export function onReachabilityChange(l: Listener): void {
  reachabilityListeners.push(l);
}
// Called when the server stops accepting the session's token (revoked, expired).
export function onUnauthorized(l: Listener): void {
  unauthorizedListeners.push(l);
}

function setReachable(r: boolean): void {
  if (r === reachable) return;
  reachable = r;
  for (const l of reachabilityListeners) l();
}

export function authHeaders(): Record<string, string> {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

async function errorFrom(res: Response): Promise<ApiError> {
  const rid = res.headers.get("X-Request-Id") ?? "";
  let code = "http_" + res.status;
  let message = res.statusText || "HTTP " + res.status;
  let field = "";
  try {
    const body = await res.json();
    if (body && typeof body === "object" && body.error) {
      code = String(body.error.code ?? code);
      message = String(body.error.message ?? message);
      field = String(body.error.field ?? "");
    }
  } catch {
    // Not JSON (a proxy's page): keep the status text.
  }
  return new ApiError(res.status, code, message, field, rid);
}

export interface RequestOptions {
  body?: unknown; // serialised as JSON unless already a string
  headers?: Record<string, string>;
  signal?: AbortSignal;
  // A 401 is the caller's to handle (checking a token at sign-in), not a sign-out.
  probe?: boolean;
}

export async function request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", ...authHeaders(), ...opts.headers };
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
    headers["Content-Type"] = "application/json";
  }
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body, signal: opts.signal, cache: "no-store" });
  } catch (e) {
    if (opts.signal?.aborted) throw e;
    setReachable(false);
    throw new ApiError(0, "unavailable", "Cannot reach the server");
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    setReachable(!err.unreachable);
    if (res.status === 401 && token() && !opts.probe) for (const l of unauthorizedListeners) l();
    throw err;
  }
  setReachable(true);
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const get = <T>(path: string, signal?: AbortSignal) => request<T>("GET", path, { signal });
export const post = <T>(path: string, body?: unknown, headers?: Record<string, string>) =>
  request<T>("POST", path, { body: body ?? {}, headers });
export const patch = <T>(path: string, body: unknown, headers?: Record<string, string>) =>
  request<T>("PATCH", path, { body, headers });
export const del = <T>(path: string) => request<T>("DELETE", path);

// "/v1/jobs" + {limit: 50, state: ""} -> "/v1/jobs?limit=50" (empty values left out).
export function withQuery(path: string, q: Record<string, string | number | null | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== "" && v !== null && v !== undefined) p.set(k, String(v));
  const s = p.toString();
  return s ? path + "?" + s : path;
}
