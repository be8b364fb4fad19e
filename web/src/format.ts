// How numbers, times and sizes read on the page.

export function age(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "—";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "—";
  return duration((now - t) / 1000);
}

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}

export function time(iso: string | null | undefined): string {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "—";
  return d.toLocaleString(undefined, { hour12: false });
}

// 3 significant digits with SI suffixes: 123456 -> "123k".
export function num(v: unknown): string {
  if (typeof v !== "number" || !Number.isFinite(v)) return "—";
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e9) return (v / 1e9).toPrecision(3) + "G";
  if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
  if (a >= 1e4) return (v / 1e3).toPrecision(3) + "k";
  if (a >= 1) return Number.isInteger(v) ? String(v) : v.toPrecision(4).replace(/\.?0+$/, "");
  return v.toPrecision(3);
}

export function bytes(v: unknown): string {
  if (typeof v !== "number" || !Number.isFinite(v)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let x = v;
  let i = 0;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return (i === 0 ? String(x) : x.toFixed(1)) + " " + units[i];
}

export function percent(v: unknown): string {
  return typeof v === "number" && Number.isFinite(v) ? (v * 100).toFixed(0) + "%" : "—";
}

// A measured value as it compares (a gate's success rates and margins): up to 4 significant
// digits, no padding: 0.5, 0.51, 0.03, 0.5833.
export function value(v: unknown): string {
  return typeof v === "number" && Number.isFinite(v) ? String(Number(v.toPrecision(4))) : "—";
}
