// Submit a job: a form for the common JobSpec fields, or the whole JobSpec as JSON. The server
// validates completely; its error names the offending field ("resources.nodes") and is shown
// next to that field (or under the JSON editor). Blank form fields are left out so the server's
// defaults apply. Beside the form, as the spec is edited: the forecast (../forecast.ts: a dry
// run's admission, placement, predicted start and run time) and the plan (../plan.ts: the step
// time at the GPU counts asked).
import { ApiError, get, post } from "../api";
import { h, replace } from "../dom";
import { navigate, type Page } from "../router";
import { forecastPanel } from "../forecast";
import { can } from "../session";
import { planPanel } from "../plan";
import type { Job } from "../types";
import { messageBox } from "../ui";

type Kind = "text" | "int" | "number" | "bool" | "select" | "argv";

interface Field {
  path: string; // dotted JobSpec path, as the server names it in errors
  label: string;
  kind: Kind;
  options?: string[];
  placeholder?: string;
  hint?: string;
  only?: "train" | "command";
}

const kSections: [string, Field[]][] = [
  [
    "Job",
    [
      { path: "name", label: "Name", kind: "text", placeholder: "reach-bc" },
      { path: "kind", label: "Kind", kind: "select", options: ["train", "command"] },
      { path: "priority", label: "Priority", kind: "int", placeholder: "50", hint: "0–100, higher runs first" },
      { path: "max_restarts", label: "Max restarts", kind: "int", placeholder: "0" },
      { path: "time_limit_seconds", label: "Time limit (s)", kind: "int", placeholder: "none" },
      { path: "command", label: "Command", kind: "argv", only: "command", hint: "one argument per line", placeholder: "python3\ntrain.py" },
    ],
  ],
  [
    "Resources",
    [
      { path: "resources.nodes", label: "Nodes", kind: "int", placeholder: "1" },
      { path: "resources.ranks_per_node", label: "Ranks per node", kind: "int", placeholder: "1" },
      { path: "resources.slot_type", label: "Slot type", kind: "select", options: ["cpu", "gpu"] },
      { path: "resources.slots_per_rank", label: "Slots per rank", kind: "int", placeholder: "1" },
    ],
  ],
  [
    "Model",
    [
      { path: "engine.model.d_model", label: "Width (d_model)", kind: "int", placeholder: "128", only: "train" },
      { path: "engine.model.layers", label: "Layers", kind: "int", placeholder: "2", only: "train" },
      { path: "engine.model.heads", label: "Heads", kind: "int", placeholder: "4", only: "train" },
      { path: "engine.model.mlp", label: "MLP width", kind: "int", placeholder: "4 × width", only: "train" },
      { path: "engine.model.action_horizon", label: "Action horizon", kind: "int", placeholder: "16", only: "train" },
    ],
  ],
  [
    "Data and optimisation",
    [
      { path: "engine.data.dataset", label: "Dataset", kind: "text", placeholder: "sim:reach", only: "train" },
      { path: "engine.data.tokens_per_row", label: "Tokens per row", kind: "int", placeholder: "512", only: "train" },
      { path: "engine.data.rows_per_step", label: "Rows per step", kind: "int", placeholder: "8", only: "train" },
      { path: "engine.data.packing", label: "Packing", kind: "bool", only: "train" },
      { path: "engine.optim.steps", label: "Steps", kind: "int", placeholder: "200", only: "train" },
      { path: "engine.optim.lr", label: "Learning rate", kind: "number", placeholder: "0.001", only: "train" },
      { path: "engine.optim.warmup_steps", label: "Warm-up steps", kind: "int", placeholder: "10", only: "train" },
      { path: "engine.checkpoint.every_steps", label: "Checkpoint every", kind: "int", placeholder: "end only", only: "train" },
    ],
  ],
];
const kFields = kSections.flatMap(([, f]) => f);

const kTemplate = {
  name: "reach-bc",
  kind: "train",
  resources: { nodes: 2, ranks_per_node: 1, slot_type: "cpu", slots_per_rank: 1 },
  engine: {
    model: { d_model: 96, layers: 2, heads: 4, action_horizon: 16 },
    data: { dataset: "sim:reach", tokens_per_row: 512, rows_per_step: 2, packing: true },
    optim: { steps: 200, lr: 0.003 },
    checkpoint: { every_steps: 100 },
  },
};

function getPath(o: unknown, path: string): unknown {
  return path.split(".").reduce<unknown>((x, k) => (x && typeof x === "object" ? (x as Record<string, unknown>)[k] : undefined), o);
}
function setPath(o: Record<string, unknown>, path: string, v: unknown): void {
  const keys = path.split(".");
  let x = o;
  for (const k of keys.slice(0, -1)) {
    if (!x[k] || typeof x[k] !== "object" || Array.isArray(x[k])) x[k] = {};
    x = x[k] as Record<string, unknown>;
  }
  x[keys[keys.length - 1]] = v;
}

export function submitPage(_: Record<string, string>, query: URLSearchParams): Page {
  const msg = messageBox();
  if (!can.submit()) {
    msg.show(new ApiError(403, "permission_denied", "submitting jobs needs role member or above"));
    return { title: "Submit", el: h("div", { class: "page" }, h("h1", null, "Submit a job"), msg.el) };
  }
  let mode: "form" | "json" = "form";
  // Keys of the JSON a form does not show (e.g. engine.attention) survive a round trip.
  let base: Record<string, unknown> = structuredClone(kTemplate);
  let idempotencyKey = newKey();

  const inputs = new Map<string, HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>();
  const errors = new Map<string, HTMLElement>();
  const rows = new Map<string, HTMLElement>();
  const form = h("div", { class: "spec-form" });
  for (const [title, fields] of kSections) {
    const grid = h("div", { class: "field-grid" });
    for (const f of fields) {
      const id = "f-" + f.path.replace(/\./g, "-");
      let input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
      if (f.kind === "select") input = h("select", { id, name: f.path }, f.options!.map((o) => h("option", { value: o }, o)));
      else if (f.kind === "argv") input = h("textarea", { id, name: f.path, rows: 3, placeholder: f.placeholder ?? "" });
      else if (f.kind === "bool") input = h("input", { id, name: f.path, type: "checkbox" });
      else
        input = h("input", {
          id,
          name: f.path,
          type: f.kind === "text" ? "text" : "number",
          step: f.kind === "int" ? "1" : "any",
          placeholder: f.placeholder ?? "",
        });
      input.dataset.field = f.path;
      if (f.path === "kind") input.addEventListener("change", showKind);
      const err = h("div", { class: "field-error", "data-error-for": f.path, role: "alert" });
      const row = h("div", { class: "field" + (f.kind === "argv" ? " wide" : "") }, h("label", { for: id }, f.label), input, f.hint ? h("div", { class: "hint" }, f.hint) : null, err);
      inputs.set(f.path, input);
      errors.set(f.path, err);
      rows.set(f.path, row);
      grid.append(row);
    }
    form.append(h("fieldset", null, h("legend", null, title), grid));
  }

  const editor = h("textarea", { id: "spec-json", class: "json-editor", spellcheck: "false", rows: 28 });
  const editorError = h("div", { class: "field-error", "data-error-for": "json", role: "alert" });
  const jsonPane = h("div", { class: "json-pane", hidden: true }, editor, editorError);
  const tabs = h(
    "div",
    { class: "tabs" },
    h("button", { class: "tab active", id: "mode-form", onclick: () => setMode("form") }, "Form"),
    h("button", { class: "tab", id: "mode-json", onclick: () => setMode("json") }, "JSON"),
  );
  const submit = h("button", { class: "btn primary", id: "submit-job", onclick: () => void send() }, "Submit");

  function newKey(): string {
    return crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2);
  }

  function showKind(): void {
    const kind = inputs.get("kind")!.value;
    for (const f of kFields) if (f.only) rows.get(f.path)!.hidden = f.only !== kind;
  }

  function fill(spec: Record<string, unknown>): void {
    base = structuredClone(spec);
    for (const f of kFields) {
      const input = inputs.get(f.path)!;
      const v = getPath(spec, f.path);
      if (f.kind === "bool") (input as HTMLInputElement).checked = v !== false;
      else if (f.kind === "argv") input.value = Array.isArray(v) ? v.join("\n") : "";
      else input.value = v === undefined || v === null ? (f.kind === "select" ? f.options![0] : "") : String(v);
    }
    showKind();
  }

  function fromForm(): Record<string, unknown> {
    const spec: Record<string, unknown> = structuredClone(base);
    const kind = inputs.get("kind")!.value;
    if (kind === "command") delete spec.engine;
    else delete spec.command;
    for (const f of kFields) {
      if (f.only && f.only !== kind) continue;
      const input = inputs.get(f.path)!;
      const raw = input.value.trim();
      let v: unknown;
      if (f.kind === "bool") v = (input as HTMLInputElement).checked;
      else if (f.kind === "argv") v = raw ? raw.split("\n").map((s) => s.trim()).filter(Boolean) : undefined;
      else if (f.kind === "int" || f.kind === "number") v = raw === "" ? undefined : Number.isNaN(Number(raw)) ? raw : Number(raw);
      else v = raw === "" ? undefined : raw;
      if (v === undefined) removePath(spec, f.path);
      else setPath(spec, f.path, v);
    }
    return spec;
  }

  function setMode(m: "form" | "json"): void {
    if (m === mode) return;
    clearErrors();
    if (m === "json") {
      editor.value = JSON.stringify(fromForm(), null, 2);
    } else {
      let spec: unknown;
      try {
        spec = JSON.parse(editor.value);
      } catch (e) {
        replace(editorError, "Not valid JSON: " + (e as Error).message);
        return;
      }
      if (!spec || typeof spec !== "object" || Array.isArray(spec)) {
        replace(editorError, "A JobSpec is a JSON object.");
        return;
      }
      fill(spec as Record<string, unknown>);
    }
    mode = m;
    form.hidden = m !== "form";
    jsonPane.hidden = m !== "json";
    tabs.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t.id === "mode-" + m));
  }

  function clearErrors(): void {
    planMarked = null;
    msg.show(null);
    replace(editorError);
    for (const [path, e] of errors) {
      replace(e);
      inputs.get(path)!.classList.remove("invalid");
    }
  }

  function showError(e: unknown): void {
    if (!(e instanceof ApiError) || e.status !== 400 || mode === "json" || !e.field) {
      if (mode === "json" && e instanceof ApiError && e.status === 400) {
        replace(editorError, (e.field ? e.field + ": " : "") + e.message);
        return;
      }
      msg.show(e);
      return;
    }
    if (markField(e.field, e.message, true) === null) msg.show(new Error(e.field + ": " + e.message));
  }

  // Shows `message` next to the field it names, else the nearest enclosing one the form shows
  // ("engine.model" errors go next to the first model field). Returns the field marked, or null:
  // the form shows no such field.
  function markField(field: string, message: string, focus: boolean): string | null {
    let path = field;
    let target = errors.get(path);
    if (!target) {
      const near = kFields.find((f) => f.path.startsWith(path + ".") && !rows.get(f.path)!.hidden);
      if (near) target = errors.get((path = near.path));
    }
    if (!target) return null;
    replace(target, message);
    const input = inputs.get(path)!;
    input.classList.add("invalid");
    if (focus) input.focus();
    return path;
  }

  // The plan validates the spec as a submission would; its error is shown where a submission's
  // would be, without taking the focus from the field being typed in, and cleared by the next plan.
  let planMarked: string | null = null;
  const plan = planPanel(
    (field, message) => {
      clearPlanMark();
      if (mode === "json") {
        replace(editorError, field + ": " + message);
        planMarked = "json";
      } else planMarked = markField(field, message, false);
    },
    clearPlanMark,
  );
  function clearPlanMark(): void {
    if (planMarked === null) return;
    // Only the plan's own mark: a submission's error elsewhere stays until the next submission.
    if (planMarked === "json") replace(editorError);
    else {
      replace(errors.get(planMarked)!);
      inputs.get(planMarked)!.classList.remove("invalid");
    }
    planMarked = null;
  }
  function specForPlan(): Record<string, unknown> | null {
    if (mode === "form") return fromForm();
    try {
      const spec: unknown = JSON.parse(editor.value);
      return spec && typeof spec === "object" && !Array.isArray(spec) ? (spec as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  }
  const forecast = forecastPanel();
  const specChanged = () => {
    const spec = specForPlan();
    plan.update(spec);
    forecast.update(spec);
  };
  form.addEventListener("input", specChanged);
  form.addEventListener("change", specChanged);
  editor.addEventListener("input", specChanged);

  async function send(): Promise<void> {
    clearErrors();
    let body: string;
    if (mode === "json") body = editor.value;
    else body = JSON.stringify(fromForm());
    submit.disabled = true;
    try {
      const job = await post<Job>("/v1/jobs", body, { "Idempotency-Key": idempotencyKey });
      idempotencyKey = newKey();
      navigate("/jobs/" + job.id);
    } catch (e) {
      showError(e);
    } finally {
      submit.disabled = false;
    }
  }

  fill(kTemplate);
  const from = query.get("from");
  if (from) {
    get<Job>("/v1/jobs/" + encodeURIComponent(from))
      .then((j) => {
        fill(j.spec);
        specChanged();
      })
      .catch((e) => msg.show(e));
  }

  const el = h(
    "div",
    { class: "page submit" },
    h("div", { class: "page-head" }, h("h1", null, "Submit a job"), tabs),
    msg.el,
    h(
      "div",
      { class: "submit-layout" },
      h("section", { class: "card" }, form, jsonPane, h("div", { class: "form-actions" }, submit, h("span", { class: "muted" }, "The server checks every field; blank fields take its defaults."))),
      h("div", { class: "side" }, forecast.el, plan.el),
    ),
  );
  specChanged();
  return { title: "Submit", el };
}

function removePath(o: Record<string, unknown>, path: string): void {
  const keys = path.split(".");
  let x: unknown = o;
  for (const k of keys.slice(0, -1)) {
    if (!x || typeof x !== "object") return;
    x = (x as Record<string, unknown>)[k];
  }
  if (x && typeof x === "object") delete (x as Record<string, unknown>)[keys[keys.length - 1]];
}
