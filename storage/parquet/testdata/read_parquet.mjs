// Reads a Parquet file with the independent reader (arrow-rs through parquet-wasm) and prints it
// as JSON, for the tests of our writer (storage/parquet/writer_test.cc, the LeRobot export):
//
//   node read_parquet.mjs FILE
//   {"num_rows": N, "fields": {"name": "arrow type", ...}, "metadata": {key: value},
//    "columns": {"name": [row values], ...}}
//
// Numbers print as JSON numbers (a float32 as the double that holds it exactly), int64 as
// numbers when safe and strings otherwise, lists as arrays, nulls as null.
import * as arrow from "apache-arrow";
import * as pq from "parquet-wasm";
import fs from "node:fs";

if (process.argv.length < 3) {
  console.error("usage: node read_parquet.mjs FILE");
  process.exit(2);
}
const bytes = new Uint8Array(fs.readFileSync(process.argv[2]));
const table = arrow.tableFromIPC(pq.readParquet(bytes).intoIPCStream());

const plain = (v) => {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") {
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(v) : v.toString();
  }
  if (typeof v === "object" && typeof v.toArray === "function") return Array.from(v.toArray(), plain);
  if (ArrayBuffer.isView(v)) return Array.from(v, plain);
  return v;
};
const out = { num_rows: table.numRows, fields: {}, metadata: {}, columns: {} };
for (const [k, v] of table.schema.metadata) out.metadata[k] = v;
for (const field of table.schema.fields) {
  out.fields[field.name] = String(field.type);
  const col = table.getChild(field.name);
  const values = [];
  for (let i = 0; i < table.numRows; ++i) values.push(plain(col.get(i)));
  out.columns[field.name] = values;
}
process.stdout.write(JSON.stringify(out));
