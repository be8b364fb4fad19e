// The differences of several JobSpecs, as a comparison lists them beside its charts: each spec
// flattened to dotted keys ("engine.optim.lr", "command[1]") with its leaf values, and only the
// keys whose value is not the same in every spec (absent counts as a value) kept, sorted.

export type Flat = Map<string, string>;

export function flatten(value: unknown, prefix = "", out: Flat = new Map()): Flat {
  if (Array.isArray(value)) {
    if (value.length === 0) out.set(prefix, "[]");
    value.forEach((v, i) => flatten(v, `${prefix}[${i}]`, out));
  } else if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0 && prefix) out.set(prefix, "{}");
    for (const [k, v] of entries) flatten(v, prefix ? prefix + "." + k : k, out);
  } else {
    out.set(prefix, typeof value === "string" ? value : JSON.stringify(value));
  }
  return out;
}

export interface DiffRow {
  key: string;
  values: (string | undefined)[]; // one per spec; undefined: the spec has no such key
}

export function diffSpecs(specs: unknown[]): DiffRow[] {
  const flats = specs.map((s) => flatten(s));
  const keys = new Set<string>();
  for (const f of flats) for (const k of f.keys()) keys.add(k);
  const rows: DiffRow[] = [];
  for (const key of [...keys].sort()) {
    const values = flats.map((f) => f.get(key));
    if (values.some((v) => v !== values[0])) rows.push({ key, values });
  }
  return rows;
}
