// The dashboard's shell: header with navigation and who is signed in, the reconnect banner, and
// the page the URL names. Pages are created on navigation and disposed when left.
import "uplot/dist/uPlot.min.css";
import "./style.css";

import { isReachable, onReachabilityChange, onUnauthorized } from "./api";
import { h, replace } from "./dom";
import { auditPage } from "./pages/audit";
import { comparePage } from "./pages/compare";
import { jobPage } from "./pages/job";
import { jobsPage } from "./pages/jobs";
import { nodesPage } from "./pages/nodes";
import { overviewPage } from "./pages/overview";
import { pipelinePage } from "./pages/pipeline";
import { pipelinesPage } from "./pages/pipelines";
import { signInPage } from "./pages/signin";
import { submitPage } from "./pages/submit";
import { tenantsPage } from "./pages/tenants";
import { tokensPage } from "./pages/tokens";
import { match, navigate, route, startRouter, type Page } from "./router";
import { can, resume, signOut, whoami } from "./session";

route("/", overviewPage);
route("/jobs", jobsPage);
route("/jobs/:id", jobPage);
route("/compare", comparePage);
route("/pipelines", pipelinesPage);
route("/pipelines/:id", pipelinePage);
route("/submit", submitPage);
route("/nodes", nodesPage);
route("/tenants", tenantsPage);
route("/tokens", tokensPage);
route("/audit", auditPage);

const app = document.getElementById("app")!;
const nav = h("nav", { class: "nav" });
const user = h("div", { class: "user" });
const banner = h("div", { class: "banner", role: "status", hidden: true }, "Lost the connection to the server. Reconnecting…");
const main = h("main", { class: "main" });
app.append(
  h("header", { class: "top" }, h("a", { href: "/", class: "brand" }, h("span", { class: "logo" }, "E"), "Embody"), nav, user),
  banner,
  main,
);
onReachabilityChange(() => (banner.hidden = isReachable()));

let current: Page | null = null;
let resumed = false;

function renderNav(): void {
  const links: [string, string, boolean][] = [
    ["/", "Overview", true],
    ["/jobs", "Jobs", true],
    ["/pipelines", "Pipelines", true],
    ["/submit", "Submit", can.submit()],
    ["/nodes", "Nodes", true],
    ["/tenants", "Tenants", can.operate()],
    ["/tokens", "Tokens", can.manageTokens()],
    ["/audit", "Audit", can.manageTokens()],
  ];
  const path = location.pathname;
  replace(
    nav,
    !whoami()
      ? null
      : links
      .filter(([, , shown]) => shown)
      .map(([href, text]) => {
        const active = href === "/" ? path === "/" : path === href || path.startsWith(href + "/");
        return h("a", { href, class: active ? "active" : "" }, text);
      }),
  );
  const me = whoami();
  replace(
    user,
    me
      ? [
          h("span", { class: "who", title: "token " + (me.name || "") }, me.name || "signed in"),
          me.tenant ? h("span", { class: "chip" }, me.tenant) : null,
          me.role !== "unknown" ? h("span", { class: "chip role" }, me.role) : null,
          h("button", { class: "btn small", id: "sign-out", onclick: () => (signOut(), navigate("/signin")) }, "Sign out"),
        ]
      : null,
  );
}

function show(page: Page): void {
  current?.dispose?.();
  current = page;
  document.title = page.title + " · Embody";
  replace(main, page.el);
}

async function render(): Promise<void> {
  if (!resumed) {
    resumed = true;
    try {
      await resume();
    } catch {
      // An unreachable server or a stale token: the sign-in page says which.
    }
  }
  const path = location.pathname;
  if (!whoami() || path === "/signin") {
    const next = path === "/signin" ? new URLSearchParams(location.search).get("next") || "/" : path + location.search;
    if (path !== "/signin") history.replaceState(null, "", "/signin?next=" + encodeURIComponent(next));
    renderNav();
    show(signInPage(next));
    return;
  }
  renderNav();
  const m = match(path);
  if (!m) {
    show({ title: "Not found", el: h("div", { class: "page" }, h("h1", null, "Not found"), h("p", null, "No page at ", h("code", null, path), ". ", h("a", { href: "/" }, "Overview"))) });
    return;
  }
  show(m.page(m.params, new URLSearchParams(location.search)));
}

onUnauthorized(() => {
  signOut();
  navigate("/signin?next=" + encodeURIComponent(location.pathname + location.search) + "&expired=1");
});

startRouter(() => void render());
