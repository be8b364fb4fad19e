// Pieces every page uses: the state badge, the message box for what the server refused, a
// progress bar, a table with a header.
import { ApiError } from "./api";
import { h, replace, type Child } from "./dom";
import { whoami } from "./session";

export function stateBadge(state: string): HTMLElement {
  return h("span", { class: "badge state-" + state.toLowerCase() }, state);
}

// What went wrong, in words: never a blank page.
export function describe(e: unknown): string {
  if (e instanceof ApiError) {
    if (e.status === 0) return "Cannot reach the server. Retrying…";
    if (e.status === 403) {
      const role = whoami()?.role;
      return "Not allowed" + (role && role !== "unknown" ? " for role " + role : "") + ": " + e.message;
    }
    if (e.status === 404) return "Not found: " + e.message;
    if (e.status === 401) return "Sign-in required: " + e.message;
    const rid = e.requestId ? " (request " + e.requestId + ")" : "";
    return e.message + rid;
  }
  return e instanceof Error ? e.message : String(e);
}

// A box that shows the latest error of a part of a page, or nothing.
export function messageBox(): { el: HTMLElement; show(e: unknown | null): void; info(text: string): void } {
  const el = h("div", { class: "message", role: "alert", hidden: true });
  return {
    el,
    show(e) {
      if (e === null) {
        el.hidden = true;
        return;
      }
      el.className = "message " + (e instanceof ApiError && e.status === 0 ? "warn" : "error");
      replace(el, describe(e));
      el.hidden = false;
    },
    info(text) {
      el.className = "message info";
      replace(el, text);
      el.hidden = false;
    },
  };
}

export function progress(step: number | undefined, steps: number | undefined): HTMLElement {
  if (typeof step !== "number") return h("span", { class: "muted" }, "—");
  const frac = typeof steps === "number" && steps > 0 ? Math.min(1, step / steps) : 0;
  return h(
    "div",
    { class: "progress", title: Math.round(frac * 100) + "%" },
    h("div", { class: "bar" }, h("div", { class: "fill", style: `width:${(frac * 100).toFixed(1)}%` })),
    h("span", { class: "label" }, typeof steps === "number" ? `${step} / ${steps}` : String(step)),
  );
}

export function table(headers: string[], cls = ""): { el: HTMLTableElement; body: HTMLTableSectionElement } {
  const body = h("tbody");
  const el = h("table", { class: "table " + cls }, h("thead", null, h("tr", null, headers.map((t) => h("th", null, t)))), body);
  return { el, body };
}

export function emptyRow(cols: number, text: string): HTMLTableRowElement {
  return h("tr", { class: "empty" }, h("td", { colspan: cols }, text));
}

export function card(title: string, ...body: Child[]): HTMLElement {
  return h("section", { class: "card" }, h("h2", null, title), ...body);
}

export function stat(label: string, value: Child, cls = ""): HTMLElement {
  return h("div", { class: "stat " + cls }, h("div", { class: "stat-value" }, value), h("div", { class: "stat-label" }, label));
}
