// The logs of every rank of a job, following as they are written: one streaming
// GET /v1/jobs/{id}/logs?follow=1 (lines prefixed "[rank N] " or "[launcher] "), read as it
// arrives. When the stream ends before the job has (a server restart), it is read again from
// the start after a pause; the panel shows the last kMaxLines lines and can show one rank only.
import { authHeaders } from "./api";
import { h, replace } from "./dom";

const kMaxLines = 5000;

interface Line {
  source: string; // "launcher", "0", "1", ...
  text: string;
}

export class LogPanel {
  readonly el: HTMLElement;
  private readonly pre: HTMLElement;
  private readonly status: HTMLElement;
  private readonly filter: HTMLSelectElement;
  private readonly sources = new Set<string>();
  private lines: Line[] = [];
  private dropped = 0;
  private abort: AbortController | null = null;
  private stopped = false;

  constructor(
    private readonly jobId: number,
    private readonly ended: () => Promise<boolean>,
  ) {
    this.pre = h("div", { class: "log", id: "logs", tabindex: 0 });
    this.status = h("span", { class: "muted", id: "log-status" }, "Connecting…");
    this.filter = h("select", { id: "log-rank", onchange: () => this.renderAll() }, h("option", { value: "" }, "All ranks"));
    this.el = h("div", null, h("div", { class: "toolbar" }, this.filter, h("span", { class: "grow" }), this.status), this.pre);
    void this.follow();
  }

  dispose(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  private async follow(): Promise<void> {
    let pause = 1000;
    while (!this.stopped) {
      this.abort = new AbortController();
      let complete = false;
      try {
        const res = await fetch(`/v1/jobs/${this.jobId}/logs?follow=1`, {
          headers: authHeaders(),
          signal: this.abort.signal,
          cache: "no-store",
        });
        if (!res.ok) {
          let message = res.statusText;
          try {
            message = (await res.json()).error.message;
          } catch {
            // keep the status text
          }
          throw new Error(`HTTP ${res.status}: ${message}`);
        }
        this.reset();
        replace(this.status, "Following");
        await this.read(res.body!);
        complete = await this.ended();
        pause = 1000;
      } catch (e) {
        if (this.stopped) return;
        replace(this.status, "Logs unavailable (" + (e instanceof Error ? e.message : String(e)) + "). Retrying…");
      }
      if (complete) {
        replace(this.status, this.lines.length || this.dropped ? "End of logs (job finished)" : "No log output (job finished)");
        return;
      }
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(10000, pause * 2);
    }
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let partial = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      partial += decoder.decode(value, { stream: true });
      const parts = partial.split("\n");
      partial = parts.pop() ?? "";
      this.addLines(parts);
    }
    partial += decoder.decode();
    if (partial) this.addLines([partial]);
  }

  private reset(): void {
    this.lines = [];
    this.dropped = 0;
    this.pre.replaceChildren();
  }

  private addLines(raw: string[]): void {
    const added: Line[] = [];
    for (const text of raw) {
      const m = /^\[(rank (\d+)|launcher)\] /.exec(text);
      const source = m ? (m[2] ?? "launcher") : "";
      if (source && !this.sources.has(source)) {
        this.sources.add(source);
        const opts = [...this.sources].sort((a, b) => (a === "launcher" ? -1 : b === "launcher" ? 1 : Number(a) - Number(b)));
        const value = this.filter.value;
        replace(
          this.filter,
          h("option", { value: "" }, "All ranks"),
          opts.map((s) => h("option", { value: s, selected: s === value }, s === "launcher" ? "Launcher" : "Rank " + s)),
        );
      }
      added.push({ source, text });
    }
    this.lines.push(...added);
    if (this.lines.length > kMaxLines) {
      this.dropped += this.lines.length - kMaxLines;
      this.lines = this.lines.slice(-kMaxLines);
      this.renderAll();
      return;
    }
    const stick = this.atBottom();
    for (const l of added) if (this.shown(l)) this.pre.appendChild(this.lineEl(l));
    if (stick) this.pre.scrollTop = this.pre.scrollHeight;
  }

  private renderAll(): void {
    const note = this.dropped ? h("div", { class: "log-note" }, `${this.dropped} earlier lines not shown`) : null;
    replace(this.pre, note, this.lines.filter((l) => this.shown(l)).map((l) => this.lineEl(l)));
    this.pre.scrollTop = this.pre.scrollHeight;
  }

  private shown(l: Line): boolean {
    return !this.filter.value || l.source === this.filter.value;
  }

  private lineEl(l: Line): HTMLElement {
    const cls = l.source === "launcher" ? "src-launcher" : l.source ? "src-" + (Number(l.source) % 8) : "";
    return h("div", { class: "line " + cls, "data-rank": l.source }, l.text);
  }

  private atBottom(): boolean {
    return this.pre.scrollHeight - this.pre.scrollTop - this.pre.clientHeight < 24;
  }
}
