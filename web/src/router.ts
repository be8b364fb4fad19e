// Client-side routing over the History API: the server answers every non-API path with
// index.html, and this picks the page. Links are plain <a href="/jobs/7">; clicks on them are
// taken here instead of loading a new document.

export interface Page {
  title: string;
  el: HTMLElement;
  dispose?(): void; // stop polling and streaming
}

export type PageFactory = (params: Record<string, string>, query: URLSearchParams) => Page;

interface Route {
  re: RegExp;
  keys: string[];
  page: PageFactory;
}

const routes: Route[] = [];
let render: () => void = () => {};

// "/jobs/:id" -> matches "/jobs/42" with {id: "42"}.
export function route(pattern: string, page: PageFactory): void {
  const keys: string[] = [];
  const re = new RegExp(
    "^" + pattern.replace(/:([a-z]+)/g, (_, k: string) => (keys.push(k), "([^/]+)")) + "/?$",
  );
  routes.push({ re, keys, page });
}

export function match(path: string): { page: PageFactory; params: Record<string, string> } | null {
  for (const r of routes) {
    const m = r.re.exec(path);
    if (m) {
      const params: Record<string, string> = {};
      r.keys.forEach((k, i) => (params[k] = decodeURIComponent(m[i + 1])));
      return { page: r.page, params };
    }
  }
  return null;
}

export function navigate(to: string, replaceState = false): void {
  if (to === location.pathname + location.search) return;
  if (replaceState) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  render();
}

// Updates the query string without rendering again (filters a page keeps in the URL).
export function setQuery(q: URLSearchParams): void {
  const s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
}

export function startRouter(onRender: () => void): void {
  render = onRender;
  window.addEventListener("popstate", () => render());
  document.addEventListener("click", (ev) => {
    if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    const a = (ev.target as Element).closest?.("a");
    const href = a?.getAttribute("href");
    if (!a || !href || !href.startsWith("/") || href.startsWith("//") || a.target || a.hasAttribute("download")) return;
    ev.preventDefault();
    navigate(href);
  });
  render();
}
