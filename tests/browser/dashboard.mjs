// Drives Embody's dashboard in headless chromium (playwright-core from web/node_modules) against
// a running stack. Run by tests/browser/browser_test.cc, which starts the stack and seeds it;
// every step prints one line, failures throw, and the last line is the timings as JSON.
//
// Environment: EMBODY_URL, EMBODY_ADMIN_TOKEN, EMBODY_BIG_JOBS (three train jobs with 100,000
// step events each, specs differing in engine.optim.lr), EMBODY_SCREENSHOTS (directory),
// EMBODY_WEB_DIR, EMBODY_CHROMIUM, EMBODY_GATE_PIPELINE (a seeded pipeline that failed on its gate).
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

const env = (k) => {
  if (!process.env[k]) throw new Error("missing " + k);
  return process.env[k];
};
const url = env("EMBODY_URL");
const admin = env("EMBODY_ADMIN_TOKEN");
const bigJobs = env("EMBODY_BIG_JOBS").split(",");
const bigJob = bigJobs[0];
const shots = env("EMBODY_SCREENSHOTS");
const gatedPipeline = env("EMBODY_GATE_PIPELINE");
const require = createRequire(env("EMBODY_WEB_DIR") + "/package.json");
const { chromium } = require("playwright-core");

const figures = {};
// The targets (jobs page 1 s, charts 500 ms) hold on a quiet machine; bench/dashboard_bench.sh
// sets EMBODY_STRICT_TIMING to enforce them. A shared, loaded test machine gets three times as
// long, which still catches a page that has become slow.
const slack = process.env.EMBODY_STRICT_TIMING ? 1 : 3;
const skipped = [];
const t0 = Date.now();
const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
  log("ok:", what);
}
// Whole-run limit: a hung step must fail the test, not ctest's timeout.
setTimeout(() => {
  console.error("dashboard.mjs: timed out after 480 s");
  process.exit(3);
}, 480_000).unref();

async function api(method, path, token, body) {
  const res = await fetch(url + path, {
    method,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, text };
}
const hasRoute = async (path) => (await api("GET", path, admin)).status !== 404;

const browser = await chromium.launch({
  executablePath: env("EMBODY_CHROMIUM"),
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
});
let page;
const errors = [];
async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const p = await context.newPage();
  p.on("pageerror", (e) => errors.push(String(e)));
  p.on("console", (m) => m.type() === "error" && !/Failed to load resource|ERR_INTERNET_DISCONNECTED|net::ERR/.test(m.text()) && errors.push(m.text()));
  p.setDefaultTimeout(20_000);
  return p;
}
const shot = async (name) => {
  await page.screenshot({ path: `${shots}/${name}.png` });
  log("screenshot", `${shots}/${name}.png`);
};
const text = (sel) => page.locator(sel).first().innerText();

async function signIn(token) {
  await page.goto(url + "/");
  await page.waitForSelector("#token");
  await page.fill("#token", token);
  await page.click("#sign-in");
  await page.waitForSelector("#sign-out");
}

async function waitForJobState(states, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = (await page.locator(".page-head .badge").first().innerText().catch(() => "")).trim();
    if (states.includes(s)) return s;
    if (Date.now() > deadline) throw new Error(`job stayed ${s}, wanted ${states.join("|")}`);
    await page.waitForTimeout(250);
  }
}

// Two command steps, the second needing the first: the cheapest pipeline that has an edge.
const commandStep = (name, script, needs) => ({
  name,
  ...(needs ? { needs } : {}),
  job: { kind: "command", time_limit_seconds: 600, resources: { nodes: 1, ranks_per_node: 1 }, command: ["sh", "-c", script] },
});

try {
  const whoamiThere = await hasRoute("/v1/whoami");

  // --- Sign in: a wrong token is refused with a message, the admin's is accepted.
  page = await newPage();
  await page.goto(url + "/jobs");
  await page.waitForSelector("#token");
  check(page.url().includes("/signin?next=%2Fjobs"), "an unsigned visit goes to the sign-in page");
  await page.fill("#token", "not-a-token");
  await page.click("#sign-in");
  await page.waitForSelector(".signin .message.error");
  check((await text(".signin .message")).includes("does not accept"), "a wrong token is refused with a message");
  await shot("01-sign-in");
  await page.fill("#token", admin);
  await page.click("#sign-in");
  await page.waitForSelector("table.jobs[data-ready]");
  check(new URL(page.url()).pathname === "/jobs", "signing in returns to the page asked for");
  // A tiny pipeline, run while the timings below are taken; its page is looked at after them.
  const pipeA = await api("POST", "/v1/pipelines", admin, { name: "browser-pipe", steps: [commandStep("first", "true"), commandStep("second", "true", ["first"])] });
  check(pipeA.status === 201, "a two-step pipeline is submitted through the API (" + pipeA.text.slice(0, 160) + ")");

  // --- Jobs page with 10,000 jobs: first load in a fresh tab, measured in the browser.
  {
    const token = admin;
    const times = [];
    for (let i = 0; i < 3; i++) {
      const p = await newPage();
      await p.goto(url + "/");
      await p.evaluate((t) => sessionStorage.setItem("embody.token", t), token);
      const start = Date.now();
      await p.goto(url + "/jobs");
      await p.waitForSelector("table.jobs[data-ready] tbody tr[data-job]");
      const inPage = await p.evaluate(() => performance.now());
      times.push({ wall: Date.now() - start, inPage: Math.round(inPage) });
      if (i === 2) {
        // Interactive: the next page of 50 comes from the server's cursor.
        const first = await p.locator("tbody tr[data-job]").first().getAttribute("data-job");
        const s = Date.now();
        await p.click("#older");
        await p.waitForFunction((f) => document.querySelector("tbody tr[data-job]")?.getAttribute("data-job") !== f, first);
        figures.jobs_next_page_ms = Date.now() - s;
        const rows = await p.locator("tbody tr[data-job]").count();
        check(rows === 50, "the second page holds 50 jobs");
      }
      await p.context().close();
    }
    figures.jobs_first_load_ms = Math.min(...times.map((t) => t.inPage));
    figures.jobs_first_load_wall_ms = Math.min(...times.map((t) => t.wall));
    log("jobs page first load (ms, navigation start to rows shown):", JSON.stringify(times));
    check(figures.jobs_first_load_ms < 1000 * slack, `jobs page with 10,000 jobs interactive in ${figures.jobs_first_load_ms} ms (< ${1000 * slack})`);
    // The list route itself, deep in the 10,000.
    const lat = [];
    for (let i = 0; i < 60; i++) {
      const cursor = 10 + Math.floor(Math.random() * 10000);
      const s = performance.now();
      const r = await api("GET", `/v1/jobs?limit=50&cursor=${cursor}`, admin);
      lat.push(performance.now() - s);
      if (r.status !== 200) throw new Error("list: " + r.text);
    }
    lat.sort((a, b) => a - b);
    figures.list_route_p50_ms = +lat[30].toFixed(1);
    figures.list_route_p95_ms = +lat[57].toFixed(1);
    log("GET /v1/jobs?limit=50&cursor=<random> over 10,000 jobs: p50", figures.list_route_p50_ms, "ms, p95", figures.list_route_p95_ms, "ms");
  }
  await shot("02-jobs");

  // --- A job with 100,000 step events: charts drawn.
  {
    const times = [];
    for (let i = 0; i < 3; i++) {
      const s = Date.now();
      await page.goto(url + "/jobs/" + bigJob);
      await page.waitForFunction(() => Number(document.querySelector('.chart[data-series="loss"]')?.dataset.points) > 0 && document.querySelector('.chart[data-series="loss"] canvas'));
      times.push(Date.now() - s);
      const d = await page.evaluate(() => ({ ...document.querySelector("#metrics")?.dataset }));
      log("  in page: since navigation", d.drawnAtMs, "ms; metrics fetch", d.fetchMs, "ms; drawing", d.drawMs, "ms");
    }
    for (const q of ["max_points=2000", "max_points=500", "names=loss&max_points=2000"]) {
      const s = performance.now();
      const r = await api("GET", `/v1/jobs/${bigJob}/metrics?${q}`, admin);
      figures["metrics_route_ms_" + q.replace(/[=&]/g, "_")] = Math.round(performance.now() - s);
      if (r.status !== 200) throw new Error("metrics: " + r.text);
    }
    log("metrics route over 100,000 step events:", JSON.stringify(figures));
    const points = await page.evaluate(() => [...document.querySelectorAll(".chart[data-points]")].reduce((n, c) => n + Number(c.dataset.points), 0));
    figures.job_100k_charts_ms = Math.min(...times);
    log("job page with 100,000 step events: charts drawn in (ms)", JSON.stringify(times), "points charted", points);
    check(figures.job_100k_charts_ms < 500 * slack, `charts of a 100,000-step job rendered in ${figures.job_100k_charts_ms} ms (< ${500 * slack})`);
    check(points >= 2000, "the 100,000-step job's charts hold the downsampled points");
    // A train job opens on its panels; the rest of its series are one click away.
    const opened = await page.evaluate(() => [...document.querySelectorAll(".chart[data-series]")].map((c) => c.dataset.series));
    check(["loss", "tokens_per_s", "step_time"].every((s) => opened.includes(s)) && !opened.includes("time") && !opened.includes("lr"), "a train job opens on loss, tokens/s and step time (" + opened.join(",") + ")");
    check(/--plan-cluster/.test(await text('.chart[data-series="step_time"] + .chart-notes')), "a job without a planned step time says why under its step-time chart");
    await page.click('#more-series [data-more="time"]');
    await page.waitForFunction(() => Number(document.querySelector('.chart[data-series="time"]')?.dataset.points) > 0);
    check((await page.getAttribute('.chart[data-series="time"]', "data-names")) === "backward_seconds,forward_seconds", "more series: the step-time breakdown opens on a click");
    check(new URL(page.url()).searchParams.get("more") === "time", "the opened series are kept in the address");
    await shot("03-job-100k-steps");
  }

  // --- Three such jobs compared: overlaid by step (then by time), their specs' differences beside.
  {
    const times = [];
    const compareUrl = url + "/compare?jobs=" + bigJobs.join(",");
    for (let i = 0; i < 3; i++) {
      const s = Date.now();
      await page.goto(compareUrl);
      await page.waitForFunction(() => Number(document.querySelector('#compare-charts .chart[data-series="loss"]')?.dataset.points) > 0 && document.querySelector('#compare-charts .chart[data-series="loss"] canvas'));
      times.push(Date.now() - s);
      const d = await page.evaluate(() => ({ ...document.querySelector("#compare-metrics")?.dataset }));
      log("  in page: since navigation", d.drawnAtMs, "ms; jobs and metrics fetch", d.fetchMs, "ms; drawing", d.drawMs, "ms");
    }
    figures.compare_3x100k_charts_ms = Math.min(...times);
    log("comparison of three 100,000-step jobs: charts drawn in (ms)", JSON.stringify(times));
    check(figures.compare_3x100k_charts_ms < 500 * slack, `the comparison of three 100,000-step jobs rendered in ${figures.compare_3x100k_charts_ms} ms (< ${500 * slack})`);
    const lossPoints = Number(await page.getAttribute('#compare-charts .chart[data-series="loss"]', "data-points"));
    check(lossPoints >= 2900, `the loss chart overlays the three jobs' downsampled points (${lossPoints})`);
    const legend = await page.locator('#compare-charts .chart[data-series="loss"] .u-legend .u-series').count();
    check(legend === 4, "one line per job (3) beside the x axis in the loss chart's legend");
    const keys = await page.locator("#spec-diff tbody tr[data-key]").evaluateAll((rs) => rs.map((r) => r.dataset.key));
    check(keys.includes("engine.optim.lr") && keys.includes("name") && !keys.includes("kind") && !keys.includes("engine.optim.steps"), "the spec differences list only the keys that differ (" + keys.join(",") + ")");
    const lrs = await page.locator('#spec-diff tr[data-key="engine.optim.lr"] td').allInnerTexts();
    check(lrs.slice(1).join(",") === "0.001,0.002,0.003", "each job's value of a differing key is shown (" + lrs.join(" | ") + ")");
    await page.click("#x-time");
    await page.waitForFunction(() => document.querySelector('#compare-charts .chart[data-series="loss"]')?.dataset.x === "time" && document.querySelector('#compare-charts .chart[data-series="loss"] canvas'));
    check(new URL(page.url()).searchParams.get("x") === "time", "the comparison switches to time since start, kept in the address");
    await page.click('[data-more="lr"]');
    await page.waitForFunction(() => Number(document.querySelector('#compare-charts .chart[data-series="lr"]')?.dataset.points) > 0);
    const lrPoints = Number(await page.getAttribute('#compare-charts .chart[data-series="lr"]', "data-points"));
    check(lrPoints >= 2900, `more series: a series outside the kind's panels is read and overlaid when picked (${lrPoints} points)`);
    await shot("03b-compare");
  }

  // --- Pipelines: the list, a pipeline's DAG with its steps' states and jobs, the editor with
  // the server's error, cancel from the page, and a failed gate's compared values.
  {
    const pipeState = async (states, timeoutMs) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const s = (await page.locator(".page-head .badge").first().innerText().catch(() => "")).trim();
        if (states.includes(s)) return s;
        if (Date.now() > deadline) throw new Error(`pipeline stayed ${s}, wanted ${states.join("|")}`);
        await page.waitForTimeout(200);
      }
    };
    await page.click('nav a[href="/pipelines"]');
    await page.waitForSelector(`table.pipelines[data-ready] tr[data-pipeline="${pipeA.json.id}"]`);
    check((await page.locator("table.pipelines th").allInnerTexts()).some((t) => /tenant/i.test(t)), "the pipelines list shows an operator each pipeline's tenant");
    await page.click(`tr[data-pipeline="${pipeA.json.id}"] td.name a`);
    await page.waitForSelector('#pipeline-dag .dag-step[data-step="second"]');
    check((await pipeState(["succeeded", "failed", "cancelled"], 60_000)) === "succeeded", "the small pipeline's page reaches succeeded");
    await page.waitForSelector('#pipeline-dag .dag-step[data-step="second"][data-state="succeeded"]');
    const boxes = await page.locator("#pipeline-dag .dag-step").evaluateAll((bs) => bs.map((b) => `${b.dataset.step}:${b.dataset.depth}:${b.dataset.state}`));
    check(boxes.join(",") === "first:0:succeeded,second:1:succeeded", "its steps are drawn in layers with their states (" + boxes.join(",") + ")");
    check((await page.locator('#pipeline-dag path.dag-edge[data-from="first"][data-to="second"]').count()) === 1, "the needs edge first → second is drawn");
    check((await page.locator("#cancel-pipeline").count()) === 0, "an ended pipeline offers no cancel");
    await shot("16a-pipeline");
    const second = (await api("GET", "/v1/pipelines/" + pipeA.json.id, admin)).json.steps.find((x) => x.name === "second");
    await page.click('#pipeline-dag .dag-step[data-step="second"] a.step-job');
    await page.waitForURL(/\/jobs\/\d+$/);
    check(page.url().endsWith("/jobs/" + second.job_id), `a step's job link opens its job (#${second.job_id})`);
    await page.waitForFunction(() => document.querySelector(".page-head h1")?.textContent?.startsWith("browser-pipe.second"));
    // ... and the job's page links back to its pipeline, naming the step.
    await page.waitForSelector("#job-pipeline");
    const back = page.locator("#job-pipeline");
    check((await back.getAttribute("href")) === "/pipelines/" + pipeA.json.id && (await back.innerText()).includes("second"), `a step's job links back to its pipeline: "${await back.innerText()}"`);

    // The editor: the server's 400 under it, naming the field; then a pipeline to cancel.
    await page.goto(url + "/pipelines");
    await page.click("#new-pipeline");
    const bad = { name: "browser-bad", steps: [commandStep("a", "true"), commandStep("b", "true", ["nope"])] };
    await page.fill("#pipeline-json", JSON.stringify(bad, null, 2));
    await page.click("#submit-pipeline");
    await page.waitForSelector('[data-error-for="pipeline-json"]:not(:empty)');
    const refused = await api("POST", "/v1/pipelines", admin, bad);
    const shown = await text('[data-error-for="pipeline-json"]');
    check(refused.status === 400 && shown === `${refused.json.error.field}: ${refused.json.error.message}`, `the server's refusal is shown under the editor, naming the field: "${shown}"`);
    await shot("16b-pipeline-editor");
    // A dry run: each step's expected start and end under the editor, and nothing stored.
    const before = (await api("GET", "/v1/pipelines?limit=500", admin)).json.pipelines.length;
    const chain = { name: "browser-dry-pipe", steps: [commandStep("first", "true"), commandStep("then", "true", ["first"])] };
    chain.steps.forEach((s) => (s.job.time_limit_seconds = 60));
    await page.fill("#pipeline-json", JSON.stringify(chain));
    await page.click("#dry-run-pipeline");
    await page.waitForSelector("#pipeline-forecast-end");
    const dryRows = await page.locator("#pipeline-forecast tbody tr").count();
    const dryEnd = await text("#pipeline-forecast-end");
    const after = (await api("GET", "/v1/pipelines?limit=500", admin)).json.pipelines.length;
    check(dryRows === 2 && /Expected to end: \d{4}-/.test(dryEnd) && after === before, `a pipeline's dry run shows each step and its expected end, storing nothing: ${dryRows} rows, "${dryEnd}", ${before} -> ${after} pipelines`);
    await page.fill("#pipeline-json", JSON.stringify({ name: "browser-cancel-pipe", steps: [commandStep("long", "sleep 300"), commandStep("after", "true", ["long"])] }));
    await page.click("#submit-pipeline");
    await page.waitForURL(/\/pipelines\/\d+$/);
    const cancelId = page.url().split("/").pop();
    // Cancelled once its first step's job exists (asked of the API: quicker than the page's poll).
    const pipeline = async () => (await api("GET", "/v1/pipelines/" + cancelId, admin)).json;
    for (let i = 0; i < 300 && (await pipeline()).steps[0].job_id === null; i++) await page.waitForTimeout(100);
    await page.click("#cancel-pipeline");
    await page.click("#confirm-cancel-pipeline");
    check(["cancelling", "cancelled"].includes(await pipeState(["cancelling", "cancelled"], 10_000)), "cancel from the pipeline's page cancels it");
    check((await page.locator("#cancel-pipeline").count()) === 0, "a cancelled pipeline offers no cancel");
    await shot("16c-pipeline-cancelled");
    // A gate that failed says which values it compared.
    await page.goto(url + "/pipelines/" + gatedPipeline);
    await page.waitForSelector('#gate-failed:not([hidden]) [data-gate="fp8-gate"]');
    const sentence = await text('#gate-failed [data-gate="fp8-gate"]');
    check(/eval-fp8 success_rate 0\.5 .*below 0\.51 = eval-bc success_rate 0\.54 .*− 0\.03/.test(sentence), "a failed gate names the values it compared: " + sentence);
    const row = await page.locator('table.gates tr[data-gate="fp8-gate"] td').allInnerTexts();
    check(row[1].startsWith("0.5 ") && row[2] === "0.51" && row[3].startsWith("0.54 ") && row[4] === "0.03" && row[5] === "failed", "the gates table lists value, threshold, reference, margin and the outcome (" + row.join(" | ") + ")");
    const gatedBoxes = await page.locator("#pipeline-dag .dag-step").evaluateAll((bs) => bs.map((b) => `${b.dataset.step}:${b.dataset.depth}:${b.dataset.state}`));
    check(gatedBoxes.join(",") === "eval-bc:0:succeeded,eval-fp8:0:succeeded,fp8-gate:1:gate_failed,deploy:2:skipped", "the gate and the step it held back sit in their layers (" + gatedBoxes.join(",") + ")");
    await shot("16d-pipeline-gate-failed");
    // The cancel, meanwhile, reached the running step's job; the step after it never ran.
    let cancelled = await pipeline();
    for (let i = 0; i < 300 && cancelled.state !== "cancelled"; i++) {
      await page.waitForTimeout(100);
      cancelled = await pipeline();
    }
    const longJob = (await api("GET", "/v1/jobs/" + cancelled.steps[0].job_id, admin)).json;
    check(cancelled.state === "cancelled" && longJob.state === "CANCELLED" && cancelled.steps[1].state === "cancelled" && cancelled.steps[1].job_id === null, "the cancel reached the running step's job, and the step after it was never submitted");
  }

  // --- Submit through the form: a bad field first, its error next to it.
  await page.click('nav a[href="/submit"]');
  await page.waitForSelector("#f-resources-nodes");
  // --- The plan beside the form: it follows the spec, the cluster and the GPU counts, and names
  // a bad field where it is.
  const planRows = () => page.locator("#plan-table tbody tr[data-gpus]");
  const stepMs = async (gpus) => {
    const t = await page.locator(`#plan-table tbody tr[data-gpus="${gpus}"] td.step`).innerText();
    return t.endsWith(" ms") ? parseFloat(t) : parseFloat(t) * 1000;
  };
  // --- The forecast beside the form: the template would start now on both (idle) nodes.
  await page.waitForSelector('#forecast-status[data-admitted="1"]', { timeout: 10_000 });
  // The form's template (web/src/pages/submit.ts), at a model width of `d_model`.
  const template = (d_model) => ({
    name: "reach-bc",
    kind: "train",
    resources: { nodes: 2, ranks_per_node: 1, slot_type: "cpu", slots_per_rank: 1 },
    engine: {
      model: { d_model, layers: 2, heads: 4, action_horizon: 16 },
      data: { dataset: "sim:reach", tokens_per_row: 512, rows_per_step: 2, packing: true },
      optim: { steps: 200, lr: 0.003 },
      checkpoint: { every_steps: 100 },
    },
  });
  const dry = await api("POST", "/v1/jobs?dry_run=true", admin, template(96));
  check(dry.status === 200 && dry.json.admitted && dry.json.starts_now, `a dry run of the form's template is admitted and starts now (${dry.text.slice(0, 160)})`);
  const placed = await text('[data-forecast="placement"]');
  check((await text('[data-forecast="start"]')).startsWith("now") && /node-a/.test(placed) && /node-b/.test(placed), "the forecast panel says it starts now on node-a and node-b: " + placed);
  check(/planner/.test(await text('[data-forecast="run"]')) && dry.json.run_time_source === "planner", "the forecast's run time is the planner's: " + (await text('[data-forecast="run"]')));
  await page.waitForFunction(() => document.querySelectorAll("#plan-table tbody tr[data-gpus]").length === 2, null, { timeout: 10_000 });
  check((await planRows().evaluateAll((rs) => rs.map((r) => r.dataset.gpus))).join(",") === "1,2", "the plan shows this machine's sizes 1 and 2");
  const smallStep = await stepMs(1);
  await page.fill("#f-engine-model-d_model", "384");
  await page.waitForFunction(
    (before) => {
      const td = document.querySelector('#plan-table tbody tr[data-gpus="1"] td.step');
      if (!td) return false;
      const t = td.textContent;
      const ms = t.endsWith(" ms") ? parseFloat(t) : parseFloat(t) * 1000;
      return ms > before * 2;
    },
    smallStep,
    { timeout: 10_000 },
  );
  const wideStep = await stepMs(1);
  check(wideStep > smallStep * 2, `a 4x wider model plans a slower step (${smallStep} → ${wideStep} ms)`);
  const direct1 = await api("POST", "/v1/plan", admin, {
    job: template(384),  // the width typed above
    gpus: [1],
    cluster: JSON.parse(await readFile(env("EMBODY_WEB_DIR") + "/../docs/plan/this-machine.json", "utf8")),
  });
  check(direct1.status === 200 && Math.abs(direct1.json.sizes[0].step_seconds * 1000 - wideStep) / wideStep < 0.02, `the panel shows the API's step time (${direct1.status} ${direct1.text.slice(0, 200)})`);
  await page.fill("#f-engine-model-d_model", "96");
  await page.selectOption("#plan-cluster", "paper-h100-rdma");
  await page.waitForFunction(() => [...document.querySelectorAll("#plan-table tbody tr[data-gpus]")].map((r) => r.dataset.gpus).join(",") === "256,512,1024", null, { timeout: 10_000 });
  check((await text("#plan-summary")).length > 0, "the plan names where adding GPUs stops paying: " + (await text("#plan-summary")));
  check((await page.locator("#plan-table tbody td.bottleneck").allInnerTexts()).every((b) => ["compute", "communication", "data"].includes(b)), "every size names its bottleneck");
  await shot("04a-submit-plan");
  await page.fill("#plan-gpus", "256,0");
  await page.waitForSelector('[data-error-for="gpus"]:not(:empty)', { timeout: 10_000 });
  check((await text('[data-error-for="gpus"]')).startsWith("gpus[1]"), "a bad GPU count is named next to the GPU field: " + (await text('[data-error-for="gpus"]')));
  await page.fill("#plan-gpus", "256,512");
  await page.fill("#f-engine-model-heads", "5");
  await page.waitForSelector('[data-error-for="engine.model.heads"]:not(:empty), [data-error-for="engine.model.d_model"]:not(:empty)', { timeout: 10_000 });
  check((await page.locator("#f-engine-model-heads.invalid, #f-engine-model-d_model.invalid").count()) === 1, "the plan's JobSpec error is shown next to the form field it names");
  await page.fill("#f-engine-model-heads", "4");
  await page.waitForFunction(() => document.querySelectorAll("#plan-table tbody tr[data-gpus]").length === 2, null, { timeout: 10_000 });
  check(
    (await page.locator(".spec-form .invalid").count()) === 0 && (await text('[data-error-for="engine.model.heads"]')) === "",
    "mending the field clears its error and brings the plan back",
  );
  await page.selectOption("#plan-cluster", "this-machine");
  await page.fill("#f-name", "browser-train");
  await page.fill("#f-resources-nodes", "0");
  await page.click("#submit-job");
  await page.waitForSelector('[data-error-for="resources.nodes"]:not(:empty)');
  const fieldError = await text('[data-error-for="resources.nodes"]');
  const direct = await api("POST", "/v1/jobs", admin, { name: "x", kind: "command", command: ["true"], resources: { nodes: 0 } });
  check(direct.status === 400 && direct.json.error.field === "resources.nodes" && fieldError === direct.json.error.message, `the server's error is shown next to resources.nodes: "${fieldError}"`);
  check(await page.locator("#f-resources-nodes.invalid").count() === 1, "the bad field is marked");
  // The refusal of this edit, not the heads=5 one a moment ago (the dry runs are debounced).
  await page.waitForFunction(() => document.querySelector('#forecast-status[data-admitted="0"]')?.textContent?.includes("resources.nodes"), null, { timeout: 10_000 });
  check((await text("#forecast-status")).includes("resources.nodes: " + direct.json.error.message), "the forecast says the job would be refused, and why: " + (await text("#forecast-status")));
  await shot("04-submit-bad-field");
  // The JSON editor names the field too.
  await page.click("#mode-json");
  const spec = JSON.parse(await page.inputValue("#spec-json"));
  check(spec.resources.nodes === 0 && spec.name === "browser-train", "the JSON editor shows the form's spec");
  spec.resources.nodes = 2;
  spec.resources.ranks_per_node = 1;
  spec.engine.model = { d_model: 48, layers: 2, heads: 4, mlp: 96, action_horizon: 4 };
  spec.engine.data = { rows_per_step: 2, tokens_per_row: 512 };
  spec.engine.optim = { steps: 150, lr: 0.004, warmup_steps: 10 };
  spec.engine.checkpoint = { every_steps: 50, keep: 2 };
  spec.engine.bogus_option = 1;
  await page.fill("#spec-json", JSON.stringify(spec, null, 2));
  await page.click("#submit-job");
  await page.waitForSelector('[data-error-for="json"]:not(:empty)');
  check((await text('[data-error-for="json"]')).startsWith("engine.bogus_option"), "a bad field in the JSON editor is named under it");
  delete spec.engine.bogus_option;
  await page.fill("#spec-json", JSON.stringify(spec, null, 2));
  await page.click("#mode-form");
  check((await page.inputValue("#f-resources-nodes")) === "2" && (await page.inputValue("#f-engine-optim-steps")) === "150", "the form takes the JSON back");
  await shot("05-submit-form");
  await page.click("#submit-job");
  await page.waitForURL(/\/jobs\/\d+$/);
  const trainId = page.url().split("/").pop();
  log("submitted job", trainId);

  // --- Watch it: running, then SUCCEEDED; charts with points; logs of both ranks.
  await waitForJobState(["RUNNING", "SUCCEEDED"], 60_000);
  await page.waitForFunction(() => Number(document.querySelector('.chart[data-series="loss"]')?.dataset.points) > 5, null, { timeout: 90_000 });
  await shot("06-job-running");
  const final = await waitForJobState(["SUCCEEDED", "FAILED", "CANCELLED"], 240_000);
  check(final === "SUCCEEDED", "the submitted job reached SUCCEEDED");
  await page.waitForFunction(() => document.querySelector("#log-status")?.textContent?.startsWith("End of logs"), null, { timeout: 30_000 });
  // An asynchronous rl job, small, on one node: submitted now, looked at once it has ended.
  const rl = await api("POST", "/v1/jobs", admin, {
    name: "browser-rl",
    kind: "rl",
    time_limit_seconds: 300, // an expected end, for the waiting job's forecast below
    resources: { nodes: 1, ranks_per_node: 1 },
    engine: {
      model: { d_model: 32, layers: 1, heads: 4, mlp: 64, action_horizon: 4 },
      rl: { task: "reach", envs: 4, rollout_steps: 16, total_env_steps: 384, minibatches: 2, epochs: 2, disaggregated: { max_staleness: 1 }, env_async: { max_wait_ms: 1 } },
      seed: 4,
    },
  });
  check(rl.status === 201, "a small asynchronous rl job is submitted (" + rl.text.slice(0, 200) + ")");
  // The train job opens on its kind's panels: loss, tokens/s, step time against the plan, data wait.
  const series = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll(".chart[data-series]")].map((c) => [c.dataset.series, Number(c.dataset.points)])));
  log("charts:", JSON.stringify(series));
  for (const s of ["loss", "tokens_per_s", "step_time", "data_wait"]) check(series[s] > 0, `chart ${s} holds data points`);
  check(series.loss >= 100, "the loss chart holds every step (>= 100 points)");
  check((await page.getAttribute('.chart[data-series="step_time"]', "data-names")) === "step_seconds,predicted_step_seconds", "the step-time chart draws the measured step time against the plan's");
  for (const g of ["time", "ratio"]) {
    await page.click(`#more-series [data-more="${g}"]`);
    await page.waitForFunction((g) => Number(document.querySelector(`.chart[data-series="${g}"]`)?.dataset.points) > 0, g);
  }
  check((await page.locator('#more-series [aria-pressed="true"]').count()) === 2, "the step-time breakdown and the efficiency ratios open from more series");
  const ranks = await page.evaluate(() => [...new Set([...document.querySelectorAll("#logs .line")].map((l) => l.dataset.rank))]);
  check(ranks.includes("0") && ranks.includes("1"), "the logs panel shows rank 0 and rank 1 (" + ranks.join(",") + ")");
  await page.selectOption("#log-rank", "1");
  check((await page.locator("#logs .line").evaluateAll((ls) => ls.every((l) => l.dataset.rank === "1"))), "the rank filter shows rank 1 only");
  await page.selectOption("#log-rank", "");
  check((await page.locator(".timeline tbody tr").count()) >= 3, "the state timeline lists the transitions");
  check((await page.locator(".checkpoints tbody tr").count()) >= 1, "checkpoints are listed");
  check((await page.locator("#evaluation dl").count()) >= 1, "the evaluation result is shown");
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot("07-job-succeeded");
  await page.evaluate(() => document.querySelector(".two")?.scrollIntoView());
  await shot("08-job-timeline");

  // --- Cancel a running job from its page.
  const long = await api("POST", "/v1/jobs", admin, {
    name: "browser-cancel",
    kind: "command",
    time_limit_seconds: 600,
    resources: { nodes: 1, ranks_per_node: 1 },
    command: ["sh", "-c", "echo started; sleep 300"],
  });
  check(long.status === 201, "a long job is submitted");
  await page.goto(url + "/jobs/" + long.json.id);
  await waitForJobState(["RUNNING"], 60_000);
  // A job for both nodes waits behind it: its page shows when it is predicted to start.
  const waiting = await api("POST", "/v1/jobs", admin, {
    name: "browser-waits",
    kind: "command",
    time_limit_seconds: 60,
    resources: { nodes: 2, ranks_per_node: 1 },
    command: ["true"],
  });
  check(waiting.status === 201, "a job that must wait is submitted");
  await page.goto(url + "/jobs/" + waiting.json.id);
  await page.waitForSelector('#job-forecast [data-forecast="start"]');
  const predicted = await api("GET", `/v1/jobs/${waiting.json.id}/forecast`, admin);
  const startText = await text('#job-forecast [data-forecast="start"]');
  check(
    predicted.status === 200 && predicted.json.starts_now === false && predicted.json.predicted_start && /\(in \d/.test(startText),
    `a pending job's page shows its predicted start (${startText}; API: ${predicted.text.slice(0, 160)})`,
  );
  check((await page.locator("#job-forecast ul.reasons li").count()) >= 1, "and the reasons it waits: " + (await text("#job-forecast ul.reasons")));
  await shot("09a-job-pending-forecast");
  await api("POST", `/v1/jobs/${waiting.json.id}/cancel`, admin);
  await page.goto(url + "/jobs/" + long.json.id);
  await waitForJobState(["RUNNING"], 10_000);
  await page.click("#cancel-job");
  await page.click("#confirm-cancel");
  check((await waitForJobState(["CANCELLED"], 60_000)) === "CANCELLED", "cancel from the job page ends the running job");
  check((await page.locator("#cancel-job").count()) === 0, "a cancelled job offers no cancel");
  await shot("09-job-cancelled");

  // --- The rl job: success, return and env steps/s, and the asynchronous-RL health panel.
  await page.goto(url + "/jobs/" + rl.json.id);
  check((await waitForJobState(["SUCCEEDED", "FAILED", "CANCELLED"], 120_000)) === "SUCCEEDED", "the rl job reached SUCCEEDED");
  await page.waitForFunction(() => Number(document.querySelector('.chart[data-series="env_steps_per_s"]')?.dataset.points) > 0 && document.querySelectorAll("#staleness-histogram .hist-row").length > 0, null, { timeout: 20_000 });
  const rlCharts = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll(".chart[data-series]")].map((c) => [c.dataset.series, Number(c.dataset.points)])));
  log("rl charts:", JSON.stringify(rlCharts));
  for (const s of ["success_rate", "mean_return", "env_steps_per_s"]) check(rlCharts[s] > 0, `the rl job opens on ${s}`);
  for (const s of ["staleness", "idle", "inference_batch", "importance_capped"]) {
    check(rlCharts[s] > 0 && (await page.locator(`[data-section="rl-health"] .chart[data-series="${s}"]`).count()) === 1, `the asynchronous-RL health panel charts ${s}`);
  }
  const lastStep = (await api("GET", "/v1/jobs/" + rl.json.id, admin)).json.last_step;
  const bars = await page.locator("#staleness-histogram .hist-row").evaluateAll((rs) => Object.fromEntries(rs.map((r) => [r.dataset.behind, Number(r.dataset.steps)])));
  check(JSON.stringify(bars) === JSON.stringify(lastStep.staleness), `the staleness histogram is the last update's (${JSON.stringify(bars)})`);
  check(!("loss" in rlCharts) && (await page.locator('#more-series [data-more="entropy"]').count()) === 1, "the rl job's other series wait under more series");
  await page.evaluate(() => document.querySelector('[data-section="rl-health"]')?.scrollIntoView());
  await shot("09b-job-rl");

  // --- Two jobs ticked on the jobs page open side by side, their specs' differences listed.
  await page.goto(url + "/jobs");
  await page.waitForSelector(`table.jobs[data-ready] tr[data-job="${rl.json.id}"]`);
  await page.check(`tr[data-job="${trainId}"] input.pick-job`);
  check(await page.isDisabled("#compare-jobs"), "one ticked job cannot be compared");
  await page.check(`tr[data-job="${rl.json.id}"] input.pick-job`);
  await page.click("#compare-jobs");
  await page.waitForURL(/\/compare\?jobs=/);
  check(new URL(page.url()).searchParams.get("jobs") === `${trainId},${rl.json.id}`, "Compare opens /compare with the ticked jobs");
  await page.waitForSelector('#spec-diff tr[data-key="kind"]');
  const kinds = await page.locator('#spec-diff tr[data-key="kind"] td').allInnerTexts();
  check(kinds.slice(1).join(",") === "train,rl", "the comparison lists the differing kind of the two jobs (" + kinds.join(" | ") + ")");
  await page.waitForFunction(() => Number(document.querySelector('#compare-charts .chart[data-series="loss"]')?.dataset.points) > 0 && Number(document.querySelector('#compare-charts .chart[data-series="success_rate"]')?.dataset.points) > 0);
  await shot("09c-compare-two");

  // --- The other pages, with screenshots.
  await page.goto(url + "/jobs?state=SUCCEEDED");
  await page.waitForSelector("table.jobs[data-ready] tbody tr[data-job]");
  const states = await page.locator("table.jobs tbody .badge").allInnerTexts();
  check(states.length === 50 && states.every((s) => s === "SUCCEEDED"), "the state filter shows SUCCEEDED jobs only");
  if ((await api("GET", "/v1/jobs?q=browser-train", admin)).json?.jobs?.length === 1) {
    await page.fill("#filter-q", "browser-tr");
    await page.waitForFunction(() => document.querySelectorAll("table.jobs tbody tr[data-job]").length === 1);
    check((await text("table.jobs tbody td.name")) === "browser-train", "search by name finds the job");
  } else skipped.push("search by name (the server has no q filter yet)");
  await page.goto(url + "/");
  await page.waitForFunction(() => document.querySelectorAll("#job-counts .stat").length > 0 && document.querySelectorAll("#capacity .stat").length > 0);
  check(/succeeded/i.test(await text("#job-counts")), "the overview counts jobs by state");
  await shot("10-overview");
  await page.goto(url + "/nodes");
  await page.waitForSelector('tr[data-node="node-a"]');
  check((await page.locator("table.nodes tbody tr[data-node]").count()) === 2, "the nodes page lists both nodes");
  await shot("11-nodes");
  for (const [path, name, sel, route] of [
    ["/tenants", "12-tenants", "table.tenants tbody tr[data-tenant]", "/v1/tenants"],
    ["/audit", "14-audit", "table.audit tbody tr", "/v1/audit"],
  ]) {
    if (!(await hasRoute(route))) {
      skipped.push(`${path} (the server has no ${route} yet)`);
      continue;
    }
    await page.goto(url + path);
    await page.waitForSelector(sel);
    await shot(name);
  }

  // --- A viewer's token, made on the tokens page: its secret is shown once.
  let viewer = "";
  if (await hasRoute("/v1/tokens")) {
    await page.goto(url + "/tokens");
    await page.waitForSelector("table.tokens tbody tr[data-token]");
    await page.fill("#token-name", "browser-viewer");
    await page.selectOption("#token-role", "viewer");
    await page.click("#create-token");
    await page.waitForSelector("#new-token:not([hidden]) .token-value");
    viewer = (await text("#new-token .token-value")).trim();
    check(/^[0-9a-f]{32,}$/.test(viewer), "the tokens page shows the new viewer token once");
    await page.waitForSelector('table.tokens tbody tr:has-text("browser-viewer")');
    await shot("13-tokens");
  } else {
    throw new Error("the server has no /v1/tokens: no viewer token can be made");
  }
  if (await hasRoute("/v1/tenants")) {
    const tenants = (await api("GET", "/v1/tenants", admin)).json.tenants;
    await page.goto(url + "/jobs");
    await page.waitForSelector("#filter-tenant option:nth-child(2)", { state: "attached" });
    await page.selectOption("#filter-tenant", String(tenants[0].id));
    await page.waitForFunction(() => location.search.includes("tenant_id="));
    await page.waitForSelector("table.jobs[data-ready] tbody tr[data-job]");
    check(new URL(page.url()).searchParams.get("tenant_id") === String(tenants[0].id), "the tenant filter is applied and kept in the URL");
  }

  // --- Reconnects: the banner comes and goes, without a reload.
  await page.goto(url + "/jobs");
  await page.waitForSelector("table.jobs[data-ready]");
  await page.evaluate(() => (window.__sameDocument = true));
  await page.context().setOffline(true);
  await page.waitForSelector(".banner:not([hidden])", { timeout: 20_000 });
  await shot("15-reconnecting");
  await page.context().setOffline(false);
  await page.waitForSelector(".banner", { state: "hidden", timeout: 30_000 });
  check(await page.evaluate(() => window.__sameDocument === true), "the page reconnects after a lost connection without a reload");

  // --- A viewer: no submit or cancel offered, and the API refuses them if forced.
  await page.click("#sign-out");
  await page.waitForSelector("#token");
  await page.fill("#token", viewer);
  await page.click("#sign-in");
  await page.waitForSelector("#sign-out");
  const running = await api("POST", "/v1/jobs", admin, {
    name: "viewer-sees-me",
    kind: "command",
    resources: { nodes: 1, ranks_per_node: 1 },
    command: ["sh", "-c", "sleep 300"],
  });
  const livePipe = await api("POST", "/v1/pipelines", admin, { name: "viewer-sees-pipe", steps: [commandStep("wait", "sleep 300")] });
  await page.goto(url + "/jobs/" + running.json.id);
  await waitForJobState(["PENDING", "SCHEDULED", "RUNNING"], 30_000);
  await page.waitForSelector(".stats .stat");
  if (whoamiThere) {
    await page.goto(url + "/pipelines/" + livePipe.json.id);
    await page.waitForSelector('#pipeline-dag[data-ready] .dag-step[data-step="wait"]');
    check((await page.locator(".page-head .badge").first().innerText()) === "running" && (await page.locator("#cancel-pipeline, #resubmit-pipeline").count()) === 0, "a viewer sees a running pipeline with no cancel");
    await page.goto(url + "/pipelines");
    await page.waitForSelector("table.pipelines[data-ready]");
    check((await page.locator("#new-pipeline").count()) === 0, "a viewer's pipelines page offers no new pipeline");
    await page.goto(url + "/jobs/" + running.json.id);
    await page.waitForSelector(".stats .stat");
    check((await page.locator('nav a[href="/submit"]').count()) === 0, "a viewer is offered no Submit link");
    check((await page.locator("#cancel-job, #resubmit").count()) === 0, "a viewer is offered no cancel on a live job");
    await page.goto(url + "/jobs");
    await page.waitForSelector("table.jobs[data-ready]");
    check((await page.locator("#new-job").count()) === 0, "a viewer's jobs page offers no submit");
    await page.goto(url + "/submit");
    await page.waitForSelector(".message.error");
    check((await page.locator("#submit-job").count()) === 0, "the submit page, reached by URL, refuses a viewer with a message");
  } else skipped.push("viewer sees no submit/cancel controls (the server has no /v1/whoami yet)");
  const forced = await page.evaluate(async (id) => {
    const h = { Authorization: "Bearer " + sessionStorage.getItem("embody.token"), "Content-Type": "application/json" };
    const a = await fetch("/v1/jobs", { method: "POST", headers: h, body: JSON.stringify({ name: "nope", kind: "command", command: ["true"] }) });
    const b = await fetch(`/v1/jobs/${id}/cancel`, { method: "POST", headers: h });
    return [a.status, b.status];
  }, running.json.id);
  check(forced[0] === 403 && forced[1] === 403, `the API refuses a viewer's forced submit and cancel (${forced})`);
  await page.goto(url + "/jobs/" + running.json.id);
  await page.waitForSelector(".stats .stat");
  await shot("16-viewer-job");
  await api("POST", `/v1/jobs/${running.json.id}/cancel`, admin);
  await api("POST", `/v1/pipelines/${livePipe.json.id}/cancel`, admin);

  check(errors.length === 0, "no script errors in the pages" + (errors.length ? ": " + errors.join(" | ") : ""));
  for (const s of skipped) log("SKIPPED:", s);
  console.log(JSON.stringify({ figures, skipped }));
  await browser.close();
} catch (e) {
  console.error("FAILED:", e?.stack ?? e);
  if (page) await page.screenshot({ path: `${shots}/failure.png` }).catch(() => {});
  if (errors.length) console.error("page errors:", errors.join("\n"));
  await browser.close();
  process.exit(1);
}
