// Who is signed in: the token (kept in sessionStorage by api.ts, so it lasts as long as the tab)
// and what GET /v1/whoami says about it. What a role may do decides which controls are offered;
// the server still decides what is allowed, and its refusals are shown as they come.
import { ApiError, request, setToken, token } from "./api";
import type { Whoami } from "./types";

let me: Whoami | null = null;

export function whoami(): Whoami | null {
  return me;
}

// Checks `t` against the server and keeps it; throws ApiError when the server refuses it.
export async function signIn(t: string): Promise<Whoami> {
  setToken(t.trim());
  try {
    me = await loadWhoami();
    return me;
  } catch (e) {
    setToken("");
    me = null;
    throw e;
  }
}

// On page load with a token from an earlier sign-in in this tab.
export async function resume(): Promise<Whoami | null> {
  if (!token()) return null;
  me = await loadWhoami();
  return me;
}

export function signOut(): void {
  setToken("");
  me = null;
}

async function loadWhoami(): Promise<Whoami> {
  try {
    return await request<Whoami>("GET", "/v1/whoami", { probe: true });
  } catch (e) {
    // A server without /v1/whoami: the token is checked on a route every role reads, and the
    // role stays unknown (every control is offered; the server refuses what the role may not do).
    if (e instanceof ApiError && e.status === 404) {
      await request("GET", "/v1/jobs?limit=1", { probe: true });
      return { token_id: null, tenant_id: null, tenant: "", role: "unknown", name: "" };
    }
    throw e;
  }
}

const kRank: Record<string, number> = { viewer: 1, member: 2, "tenant-admin": 3, "cluster-admin": 4, unknown: 4 };
const rank = () => kRank[me?.role ?? ""] ?? 0;

export const can = {
  submit: () => rank() >= 2, // and cancel
  manageTokens: () => rank() >= 3,
  operate: () => rank() >= 4, // nodes, tenants, audit, every tenant's jobs
};
