// Writes the Parquet reader's test fixtures with an independent writer: Apache Arrow's Rust
// Parquet writer (arrow-rs), compiled to WebAssembly as the npm package parquet-wasm, fed Arrow
// tables built with the apache-arrow package. Next to the .parquet files it writes
// expected.json: for every file, every column's values as written, one entry per row (null for
// a null, arrays for lists, int64 as decimal strings so no precision is lost, float32 values
// exactly as stored).
//
//   node gen_fixtures.mjs OUT_DIR [--small] [--only NAME,NAME...]
//
// Values come from a seeded generator, so the files are the same on every run of the same
// package versions. --small writes fewer rows (still several row groups, pages and delta
// blocks): the few files committed next to this script are such a run, made with
//   node gen_fixtures.mjs . --small --only types_snappy_v1_dict,types_zstd_v2_plain,\
//     types_gzip_v1_plain,types_uncompressed_v2_dict,encodings_snappy_v2,lerobot_frames,\
//     lerobot_tasks,lerobot_episodes
import * as arrow from "apache-arrow";
import * as pq from "parquet-wasm";
import fs from "node:fs";
import path from "node:path";

const args = process.argv.slice(2);
if (args.length < 1) {
  console.error("usage: node gen_fixtures.mjs OUT_DIR [--only NAME,NAME...]");
  process.exit(2);
}
const outDir = args[0];
const onlyIndex = args.indexOf("--only");
const only = onlyIndex >= 0 ? new Set(args[onlyIndex + 1].split(",")) : null;
const small = args.includes("--small");
// --bench-mib N: instead of the fixtures, two large files for bench/parquet_bench --file:
// bench_flat.parquet (one float32 column "value") and bench_lerobot.parquet
// ("observation.state", 26 float32 per row), N MiB of floats each, with the writer's defaults
// and Snappy (what LeRobot's writer uses).
const benchIndex = args.indexOf("--bench-mib");
const benchMib = benchIndex >= 0 ? Number(args[benchIndex + 1]) : 0;
fs.mkdirSync(outDir, { recursive: true });

// mulberry32: small, seeded, the same in every JavaScript engine.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- Arrow types ----------------------------------------------------------------------------
const F32 = () => new arrow.Float32();
const F64 = () => new arrow.Float64();
const I32 = () => new arrow.Int32();
const I64 = () => new arrow.Int64();
const STR = () => new arrow.Utf8();
const BOOL = () => new arrow.Bool();
const list = (t, nullableItem = true) => new arrow.List(new arrow.Field("item", t, nullableItem));
const fixedList = (n, t, nullableItem = true) =>
  new arrow.FixedSizeList(n, new arrow.Field("item", t, nullableItem));

// A column: name, Arrow type, whether the field is nullable, and its values (JS values; BigInt
// for int64; float32 values already rounded with Math.fround).
const column = (name, type, nullable, values) => ({ name, type, nullable, values });

function makeTable(columns) {
  const fields = columns.map((c) => new arrow.Field(c.name, c.type, c.nullable));
  const schema = new arrow.Schema(fields);
  const length = columns[0].values.length;
  const children = columns.map((c) => {
    const v = arrow.vectorFromArray(c.values, c.type);
    if (v.data.length !== 1) throw new Error(`column ${c.name} built in ${v.data.length} chunks`);
    return v.data[0];
  });
  const data = arrow.makeData({ type: new arrow.Struct(fields), length, nullCount: 0, children });
  return new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
}

// JSON-safe expected values: BigInt as strings, everything else as is.
const toJson = (v) =>
  v === null || v === undefined
    ? null
    : typeof v === "bigint"
      ? v.toString()
      : Array.isArray(v)
        ? v.map(toJson)
        : v;

const expected = {};

if (benchMib > 0) {
  const floats = benchMib * 262144 - ((benchMib * 262144) % 26);
  const values = new Float32Array(floats);
  const r = rng(11);
  for (let i = 0; i < floats; ++i) {
    const row = Math.floor(i / 26), k = i % 26;
    values[i] = Math.sin(0.01 * row + 0.7 * k) * (1 + 0.1 * k) + (r() - 0.5) * 0.02;
  }
  const props = () => new pq.WriterPropertiesBuilder().setCompression(pq.Compression.SNAPPY).build();
  const writeTable = (name, field, data) => {
    const schema = new arrow.Schema([field]);
    const batch = new arrow.RecordBatch(schema, arrow.makeData({
      type: new arrow.Struct([field]), length: data.length, nullCount: 0, children: [data] }));
    const table = new arrow.Table(schema, [batch]);
    const bytes = pq.writeParquet(pq.Table.fromIPCStream(arrow.tableToIPC(table, "stream")), props());
    fs.writeFileSync(path.join(outDir, name), bytes);
    console.log(`wrote ${name}: ${(bytes.length / 1048576).toFixed(1)} MiB`);
  };
  const flat = arrow.makeData({ type: F32(), length: floats, data: values });
  writeTable("bench_flat.parquet", new arrow.Field("value", F32(), false), flat);
  const listType = fixedList(26, F32());
  const list = arrow.makeData({ type: listType, length: floats / 26, nullCount: 0, child: flat });
  writeTable("bench_lerobot.parquet", new arrow.Field("observation.state", listType, true), list);
  process.exit(0);
}

function write(name, columns, props, notes) {
  if (only && !only.has(name)) return;
  const table = makeTable(columns);
  const wasmTable = pq.Table.fromIPCStream(arrow.tableToIPC(table, "stream"));
  const bytes = pq.writeParquet(wasmTable, props.build());
  fs.writeFileSync(path.join(outDir, `${name}.parquet`), bytes);
  expected[name] = {
    notes,
    num_rows: table.numRows,
    columns: Object.fromEntries(columns.map((c) => [c.name, toJson(c.values)])),
  };
}

// ---- Value generators -----------------------------------------------------------------------
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function randInt64(r) {
  const hi = BigInt(Math.floor(r() * 2 ** 32));
  const lo = BigInt(Math.floor(r() * 2 ** 32));
  return BigInt.asIntN(64, (hi << 32n) | lo);
}
const randInt32 = (r) => (Math.floor(r() * 2 ** 32) | 0);
const randF32 = (r, scale = 1000) => Math.fround((r() - 0.5) * scale);
const nullEvery = (k, i, v) => (i % k === k - 1 ? null : v);

const VOCAB = ["", "pick", "place", "put the cube in the bowl", "naïve façade", "機械学習",
               "open the drawer", "x".repeat(300), "stack 🧱 blocks"];

// The general table: every physical type, nulls, strings, lists of every common shape.
function typesColumns(rows) {
  const r = rng(42);
  const i64 = [], i32 = [], f32 = [], f64 = [], b = [], s = [], fl = [], fsl = [], vl = [],
        li = [], ls = [], lls = [];
  for (let i = 0; i < rows; ++i) {
    i64.push(i === 0 ? INT64_MIN : i === 1 ? INT64_MAX : BigInt(i) * 1000003n - 500000000n);
    i32.push(nullEvery(7, i, i === 2 ? INT32_MIN : i === 3 ? INT32_MAX : randInt32(r)));
    f32.push(nullEvery(5, i, randF32(r)));
    f64.push((r() - 0.5) * 1e12);
    b.push(nullEvery(3, i, r() < 0.5));
    s.push(nullEvery(11, i, VOCAB[Math.floor(r() * VOCAB.length)]));
    fl.push([0, 1, 2, 3].map(() => randF32(r, 10)));
    fsl.push(nullEvery(13, i, [0, 1, 2].map(() => randF32(r, 10))));
    const n = Math.floor(r() * 6);
    vl.push(nullEvery(9, i, Array.from({ length: n }, (_, k) => (k === 2 ? null : randF32(r)))));
    li.push(Array.from({ length: Math.floor(r() * 4) }, () => randInt64(r)));
    ls.push(nullEvery(6, i, Array.from({ length: Math.floor(r() * 3) },
                                      () => VOCAB[Math.floor(r() * VOCAB.length)])));
    lls.push(nullEvery(8, i, Array.from({ length: Math.floor(r() * 3) }, (_, k) =>
        k === 1 && i % 3 === 0 ? null
                               : Array.from({ length: Math.floor(r() * 3) },
                                            (_, m) => (m === 1 && i % 4 === 0 ? null : VOCAB[(i + m) % VOCAB.length])))));
  }
  return [
    column("i64", I64(), false, i64),
    column("i32", I32(), true, i32),
    column("f32", F32(), true, f32),
    column("f64", F64(), false, f64),
    column("b", BOOL(), true, b),
    column("s", STR(), true, s),
    column("fl", list(F32(), false), false, fl),
    column("fsl", fixedList(3, F32()), true, fsl),
    column("vl", list(F32()), true, vl),
    column("li", list(I64()), false, li),
    column("ls", list(STR()), true, ls),
    column("lls", list(list(STR())), true, lls),
  ];
}

const codecs = {
  uncompressed: pq.Compression.UNCOMPRESSED,
  snappy: pq.Compression.SNAPPY,
  gzip: pq.Compression.GZIP,
  zstd: pq.Compression.ZSTD,
};

// Small pages and row groups so that every column spans several of each.
const base = () =>
  new pq.WriterPropertiesBuilder()
    .setMaxRowGroupSize(100)
    .setDataPageSizeLimit(256)
    .setWriteBatchSize(16)
    .setDictionaryPageSizeLimit(4096);

for (const [codecName, codec] of Object.entries(codecs)) {
  for (const version of ["v1", "v2"]) {
    for (const dict of ["dict", "plain"]) {
      // The builder is consumed by each call (a Rust builder): always keep the returned one.
      let props = base()
        .setCompression(codec)
        .setWriterVersion(version === "v1" ? pq.WriterVersion.V1 : pq.WriterVersion.V2)
        .setDictionaryEnabled(dict === "dict");
      if (small) props = props.setMaxRowGroupSize(16);
      write(`types_${codecName}_${version}_${dict}`, typesColumns(small ? 40 : 250), props,
            `${codecName}, data pages ${version}, dictionary ${dict === "dict" ? "on" : "off"}, ` +
            "3 row groups, small pages");
    }
  }
}

// Explicit encodings: delta, byte stream split, delta strings.
function encodingColumns(rows) {
  const r = rng(7);
  const sorted = [], rand64 = [], rand32 = [], nullable64 = [], f32 = [], f64 = [], dlba = [],
        dba = [];
  let t = 1700000000000000n;
  for (let i = 0; i < rows; ++i) {
    t += BigInt(33333 + Math.floor(r() * 100));
    sorted.push(t);
    // Extremes next to each other force deltas that wrap around 64 bits.
    rand64.push(i % 17 === 0 ? INT64_MIN : i % 17 === 1 ? INT64_MAX : randInt64(r));
    rand32.push(i % 13 === 0 ? INT32_MIN : i % 13 === 1 ? INT32_MAX : randInt32(r));
    nullable64.push(nullEvery(4, i, BigInt(i * i) - 1000n));
    f32.push(randF32(r, 2));
    f64.push(Math.sin(i / 10) * 3.5);
    dlba.push(nullEvery(10, i, VOCAB[Math.floor(r() * VOCAB.length)]));
    dba.push(`observation.images.cam_${String(i % 7).padStart(2, "0")}/frame_${i}`);
  }
  return [
    column("delta_sorted", I64(), false, sorted),
    column("delta_i64", I64(), false, rand64),
    column("delta_i32", I32(), false, rand32),
    column("delta_nullable", I64(), true, nullable64),
    column("bss_f32", F32(), false, f32),
    column("bss_f64", F64(), true, f64.map((v, i) => nullEvery(9, i, v))),
    column("dlba", STR(), true, dlba),
    column("dba", STR(), false, dba),
  ];
}

for (const version of ["v1", "v2"]) {
  for (const [codecName, codec] of [["snappy", pq.Compression.SNAPPY], ["zstd", pq.Compression.ZSTD]]) {
    const props = base()
      .setMaxRowGroupSize(700)
      .setDataPageSizeLimit(1024)
      .setWriteBatchSize(64)
      .setCompression(codec)
      .setWriterVersion(version === "v1" ? pq.WriterVersion.V1 : pq.WriterVersion.V2)
      .setDictionaryEnabled(false)
      .setColumnEncoding("delta_sorted", pq.Encoding.DELTA_BINARY_PACKED)
      .setColumnEncoding("delta_i64", pq.Encoding.DELTA_BINARY_PACKED)
      .setColumnEncoding("delta_i32", pq.Encoding.DELTA_BINARY_PACKED)
      .setColumnEncoding("delta_nullable", pq.Encoding.DELTA_BINARY_PACKED)
      .setColumnEncoding("bss_f32", pq.Encoding.BYTE_STREAM_SPLIT)
      .setColumnEncoding("bss_f64", pq.Encoding.BYTE_STREAM_SPLIT)
      .setColumnEncoding("dlba", pq.Encoding.DELTA_LENGTH_BYTE_ARRAY)
      .setColumnEncoding("dba", pq.Encoding.DELTA_BYTE_ARRAY);
    write(`encodings_${codecName}_${version}`, encodingColumns(small ? 300 : 1000), props,
          "DELTA_BINARY_PACKED, BYTE_STREAM_SPLIT, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY");
  }
}

// LeRobot v2.1 / v3.0 frames: data/chunk-000/episode_000000.parquet (v2.1) or
// data/chunk-000/file-000.parquet (v3.0) have the same columns.
function lerobotFrames(episodes, dim) {
  const r = rng(2024);
  const state = [], action = [], timestamp = [], frame = [], episode = [], index = [], task = [];
  let global = 0;
  episodes.forEach((length, e) => {
    const phase = Array.from({ length: dim }, () => r() * 6.28);
    for (let f = 0; f < length; ++f) {
      state.push(phase.map((p, k) => Math.fround(Math.sin(p + f / 15) * (1 + k / 10))));
      action.push(phase.map((p, k) => Math.fround(Math.cos(p + f / 15) * (1 + k / 10) + (r() - 0.5) / 50)));
      timestamp.push(Math.fround(f / 30));
      frame.push(BigInt(f));
      episode.push(BigInt(e));
      index.push(BigInt(global++));
      task.push(BigInt(e % 2));
    }
  });
  return [
    column("observation.state", fixedList(dim, F32()), true, state),
    column("action", fixedList(dim, F32()), true, action),
    column("timestamp", F32(), true, timestamp),
    column("frame_index", I64(), true, frame),
    column("episode_index", I64(), true, episode),
    column("index", I64(), true, index),
    column("task_index", I64(), true, task),
  ];
}

// The writer settings LeRobot's (pyarrow's) defaults amount to: Snappy, dictionary on, v1 pages.
write("lerobot_frames", lerobotFrames(small ? [10, 12, 8] : [50, 60, 40], 26),
      base().setMaxRowGroupSize(1 << 20).setDataPageSizeLimit(1 << 20).setWriteBatchSize(1024)
        .setCompression(pq.Compression.SNAPPY).setWriterVersion(pq.WriterVersion.V1),
      "LeRobot frames: observation.state and action list<float32>[26], timestamp, indices");

// LeRobot v3.0 meta/tasks.parquet: the task text is the pandas index.
write("lerobot_tasks",
      [column("task_index", I64(), true, [0n, 1n]),
       column("__index_level_0__", STR(), true, ["put the cube in the bowl", "open the drawer"])],
      base().setCompression(pq.Compression.SNAPPY),
      "LeRobot v3.0 meta/tasks.parquet");

// LeRobot v3.0 meta/episodes/chunk-000/file-000.parquet: per-episode ranges, files, stats.
function lerobotEpisodes(lengths) {
  const r = rng(99);
  const cols = {
    episode_index: [], tasks: [], length: [], "data/chunk_index": [], "data/file_index": [],
    dataset_from_index: [], dataset_to_index: [],
    "videos/observation.images.top/chunk_index": [], "videos/observation.images.top/file_index": [],
    "videos/observation.images.top/from_timestamp": [],
    "videos/observation.images.top/to_timestamp": [],
    "stats/observation.state/min": [], "stats/observation.state/count": [],
    "stats/observation.images.top/mean": [],
    "meta/episodes/chunk_index": [], "meta/episodes/file_index": [],
  };
  let from = 0, t = 0;
  lengths.forEach((length, e) => {
    cols.episode_index.push(BigInt(e));
    cols.tasks.push(e % 2 ? ["open the drawer"] : ["put the cube in the bowl", "pick"]);
    cols.length.push(BigInt(length));
    cols["data/chunk_index"].push(0n);
    cols["data/file_index"].push(0n);
    cols.dataset_from_index.push(BigInt(from));
    cols.dataset_to_index.push(BigInt(from + length));
    cols["videos/observation.images.top/chunk_index"].push(0n);
    cols["videos/observation.images.top/file_index"].push(BigInt(e >> 1));
    cols["videos/observation.images.top/from_timestamp"].push(t);
    cols["videos/observation.images.top/to_timestamp"].push(t + length / 30);
    cols["stats/observation.state/min"].push(Array.from({ length: 26 }, () => r() - 1));
    cols["stats/observation.state/count"].push([BigInt(length)]);
    cols["stats/observation.images.top/mean"].push([0, 1, 2].map(() => [[r()]]));
    cols["meta/episodes/chunk_index"].push(0n);
    cols["meta/episodes/file_index"].push(0n);
    from += length;
    t = (e & 1) ? 0 : t + length / 30;
  });
  const types = {
    tasks: list(STR()),
    "stats/observation.state/min": list(F64()),
    "stats/observation.state/count": list(I64()),
    "stats/observation.images.top/mean": list(list(list(F64()))),
    "videos/observation.images.top/from_timestamp": F64(),
    "videos/observation.images.top/to_timestamp": F64(),
  };
  return Object.entries(cols).map(([name, values]) => column(name, types[name] ?? I64(), true, values));
}

write("lerobot_episodes", lerobotEpisodes([50, 60, 40]),
      base().setCompression(pq.Compression.SNAPPY),
      "LeRobot v3.0 meta/episodes: nested lists, names with '/' and '.'");

fs.writeFileSync(path.join(outDir, "expected.json"), JSON.stringify(expected) + "\n");
console.log(`wrote ${Object.keys(expected).length} fixtures to ${outDir}`);
