// Pipelines: newest first (GET /v1/pipelines, paged by the server's cursor), each with its state
// and how many of its steps succeeded, refreshed every few seconds; and, for roles that may
// submit, a JSON editor for a new one (POST /v1/pipelines). The server checks the whole DAG
// before storing anything and names the offending field ("steps[1].job.resources.nodes"); that
// message is shown under the editor. `?new=1` opens the editor, `&from=ID` fills it with that
// pipeline's spec. "Dry run" asks POST /v1/pipelines?dry_run=true and shows when each step is
// expected to start and end, storing nothing.
import { ApiError, get, post, withQuery } from "../api";
import { h, replace } from "../dom";
import { age } from "../format";
import { poll } from "../poll";
import { navigate, setQuery, type Page } from "../router";
import { can } from "../session";
import type { Pipeline, PipelineDryRun, PipelinePage } from "../types";
import { emptyRow, messageBox, progress, stateBadge, table } from "../ui";

const kPageSize = 50;

// Behaviour cloning on the simulator's scripted expert, evaluated as trained and FP8-quantised,
// gated on FP8 losing at most 3 points (examples/pipelines/recipe.json without the import).
const kTemplate = {
  name: "reach-recipe",
  steps: [
    {
      name: "bc",
      retries: 1,
      job: {
        kind: "train",
        resources: { nodes: 1, ranks_per_node: 1 },
        engine: {
          model: { d_model: 48, layers: 2, heads: 4, mlp: 96, action_horizon: 4, action_dim: 7 },
          data: { dataset: "sim:reach", rows_per_step: 2, tokens_per_row: 512 },
          optim: { steps: 600, warmup_steps: 10, lr: 0.004 },
        },
      },
    },
    { name: "eval-bc", needs: ["bc"], job: { kind: "eval", resources: { nodes: 1 }, eval: { checkpoint_from_step: "bc", tasks: ["reach"], episodes: 48 } } },
    { name: "eval-fp8", needs: ["bc"], job: { kind: "eval", resources: { nodes: 1 }, eval: { checkpoint_from_step: "bc", tasks: ["reach"], episodes: 48, fp8: true } } },
    {
      name: "fp8-gate",
      needs: ["eval-bc", "eval-fp8"],
      when: { step: "eval-fp8", metric: "success_rate", at_least: { step: "eval-bc", metric: "success_rate", minus: 0.03 } },
    },
  ],
};

function editorPanel(query: URLSearchParams): HTMLElement {
  const editor = h("textarea", { id: "pipeline-json", class: "json-editor", spellcheck: "false", rows: 22, "aria-label": "Pipeline JSON" });
  editor.value = JSON.stringify(kTemplate, null, 2);
  const error = h("div", { class: "field-error", "data-error-for": "pipeline-json", role: "alert" });
  const submit = h("button", { class: "btn primary", id: "submit-pipeline", onclick: () => void send() }, "Submit pipeline");
  const dry = h("button", { class: "btn", id: "dry-run-pipeline", onclick: () => void send(true) }, "Dry run");
  const forecast = h("div", { id: "pipeline-forecast" });
  const from = query.get("from");
  if (from) {
    get<Pipeline>("/v1/pipelines/" + encodeURIComponent(from))
      .then((p) => (editor.value = JSON.stringify(p.spec ?? {}, null, 2)))
      .catch((e) => replace(error, "Could not load pipeline #" + from + ": " + (e as Error).message));
  }

  async function send(dryRun = false): Promise<void> {
    replace(error);
    replace(forecast);
    editor.classList.remove("invalid");
    try {
      JSON.parse(editor.value);
    } catch (e) {
      replace(error, "Not valid JSON: " + (e as Error).message);
      editor.classList.add("invalid");
      return;
    }
    submit.disabled = dry.disabled = true;
    try {
      if (dryRun) {
        replace(forecast, dryRunView(await post<PipelineDryRun>("/v1/pipelines?dry_run=true", editor.value)));
        return;
      }
      const p = await post<Pipeline>("/v1/pipelines", editor.value);
      navigate("/pipelines/" + p.id);
    } catch (e) {
      // What the server refused (400 a field, 403 a priority, 404 an id, 409, 422), named.
      const named = e instanceof ApiError && !e.unreachable && e.status !== 401;
      replace(error, named ? (e.field ? e.field + ": " : "") + e.message : (e as Error).message);
      editor.classList.add("invalid");
    } finally {
      submit.disabled = dry.disabled = false;
    }
  }

  return h(
    "section",
    { class: "card", id: "new-pipeline-panel" },
    h("h2", null, "New pipeline"),
    h("p", { class: "muted small" }, "A DAG of named steps, each a job (as on the submit page), an import or a gate; see docs/pipelines.md. The server checks it whole before storing anything."),
    editor,
    error,
    h("div", { class: "form-actions" }, dry, submit),
    forecast,
  );
}

// A dry run's answer: the expected end, then a row per step (why a step has no prediction under
// its times).
function dryRunView(r: PipelineDryRun): HTMLElement {
  const seconds = (v: number | null | undefined) => (typeof v === "number" ? Math.round(v).toString() : "–");
  const when = (t: string | null) => t ?? "–";
  const rows = table(["Step", "Kind", "Needs", "Wait (s)", "Run (s)", "Start", "End"]);
  for (const s of r.steps) {
    rows.body.append(
      h(
        "tr",
        null,
        h("td", null, s.name),
        h("td", null, s.kind),
        h("td", null, s.needs.join(", ") || "–"),
        h("td", null, seconds(s.forecast?.predicted_wait_seconds)),
        h("td", null, seconds(s.forecast?.predicted_run_seconds)),
        h("td", null, when(s.predicted_start)),
        h("td", null, s.not_predicted ? h("span", { class: "muted" }, "not predicted: " + s.not_predicted) : when(s.predicted_end)),
      ),
    );
  }
  return h(
    "div",
    { class: "dry-run" },
    h("p", { id: "pipeline-forecast-end" }, "Admitted (nothing submitted). Expected to end: " + when(r.predicted_end)),
    rows.el,
  );
}

export function pipelinesPage(_: Record<string, string>, query: URLSearchParams): Page {
  const msg = messageBox();
  let cursor = query.get("cursor") ?? "";
  const back: string[] = [];
  let next: string | null = null;

  const operator = can.operate();
  const cols = ["ID", "Name", ...(operator ? ["Tenant"] : []), "State", "Steps succeeded", "Created", "Reason"];
  const t = table(cols, "pipelines");
  const info = h("span", { class: "muted", id: "pipelines-page-info" });
  const newer = h("button", { class: "btn", id: "pipelines-newer", onclick: () => go(back.pop() ?? "") }, "← Newer");
  const older = h("button", { class: "btn", id: "pipelines-older", onclick: () => next && (back.push(cursor), go(next)) }, "Older →");

  let panel: HTMLElement | null = null;
  const toggle = h("button", { class: "btn primary", id: "new-pipeline", onclick: () => showEditor(!panel || panel.hidden) }, "New pipeline");
  const editorSlot = h("div");
  function showEditor(on: boolean): void {
    if (on && !panel) editorSlot.append((panel = editorPanel(query)));
    if (panel) panel.hidden = !on;
    const q = new URLSearchParams(location.search);
    if (on) q.set("new", "1");
    else {
      q.delete("new");
      q.delete("from");
    }
    setQuery(q);
  }

  function go(c: string): void {
    cursor = c;
    const q = new URLSearchParams(location.search);
    if (cursor) q.set("cursor", cursor);
    else q.delete("cursor");
    setQuery(q);
    poller.now();
  }

  let seq = 0;
  async function refresh(): Promise<void> {
    const mine = ++seq;
    const page = await get<PipelinePage>(withQuery("/v1/pipelines", { limit: kPageSize, cursor }));
    if (mine !== seq) return;
    next = page.next_cursor;
    const now = Date.now();
    replace(
      t.body,
      page.pipelines.length === 0
        ? emptyRow(cols.length, cursor ? "No older pipelines." : "No pipelines yet.")
        : page.pipelines.map((p) => {
            const done = p.steps.filter((s) => s.state === "succeeded").length;
            const byState = new Map<string, number>();
            for (const s of p.steps) byState.set(s.state, (byState.get(s.state) ?? 0) + 1);
            return h(
              "tr",
              { "data-pipeline": p.id },
              h("td", { class: "num" }, h("a", { href: "/pipelines/" + p.id }, "#" + p.id)),
              h("td", { class: "name" }, h("a", { href: "/pipelines/" + p.id }, p.name)),
              operator ? h("td", null, p.tenant) : null,
              h("td", null, stateBadge(p.state)),
              h("td", { class: "steps", title: [...byState].map(([s, n]) => `${n} ${s}`).join(", ") }, progress(done, p.steps.length)),
              h("td", { title: p.created_at }, age(p.created_at, now) + " ago"),
              h("td", { class: "reason", title: p.reason }, p.reason),
            );
          }),
    );
    newer.disabled = !cursor;
    older.disabled = !next;
    replace(info, page.pipelines.length ? `#${page.pipelines[0].id} – #${page.pipelines[page.pipelines.length - 1].id}` : "");
    t.el.dataset.ready = "1";
  }
  const poller = poll(3000, refresh, (e) => msg.show(e));
  if (can.submit() && query.get("new")) showEditor(true);

  const el = h(
    "div",
    { class: "page" },
    h("div", { class: "page-head" }, h("h1", null, "Pipelines"), can.submit() ? toggle : null),
    editorSlot,
    h("div", { class: "toolbar" }, h("span", { class: "grow" }), info, newer, older),
    msg.el,
    t.el,
  );
  return { title: "Pipelines", el, dispose: () => poller.stop() };
}
