// Writes small LeRobot datasets, v2.1 and v3.0, in the layout LeRobot writes, with an
// independent Parquet writer (arrow-rs through parquet-wasm, as gen_fixtures.mjs): meta/info.json,
// the episode and task metadata, and the frame tables. Videos are not written here (no encoder in
// node): expected.json lists every video file the layout names, with the episodes it holds in
// order, and the C++ tests encode them with libavcodec from frames they can recompute.
//
//   node gen_lerobot.mjs OUT_DIR
//
// OUT_DIR/v21, OUT_DIR/v30: the datasets without videos, with LeRobot's statistics of action and
// observation.state (v2.1 meta/episodes_stats.jsonl, v3.0 meta/stats.json). OUT_DIR/bad:
// replacement files for the tests of inconsistent data, statistics that disagree included. OUT_DIR/expected.json: fps, the camera, image size, per episode its
// index, tasks, action and observation.state rows (float32 values exactly as stored), and the
// video files of each layout.
import * as arrow from "apache-arrow";
import * as pq from "parquet-wasm";
import fs from "node:fs";
import path from "node:path";

if (process.argv.length < 3) {
  console.error("usage: node gen_lerobot.mjs OUT_DIR");
  process.exit(2);
}
const outDir = process.argv[2];

const FPS = 10, DIM = 26, HEIGHT = 48, WIDTH = 64;
const CAMERA = "observation.images.top";
const LENGTHS = [12, 7, 9];
const TASKS = ["put the cube in the bowl", "open the drawer"];
const episodeTasks = (e) => (e === 1 ? [TASKS[1]] : [TASKS[0]]);

const F32 = () => new arrow.Float32();
const F64 = () => new arrow.Float64();
const I64 = () => new arrow.Int64();
const STR = () => new arrow.Utf8();
const list = (t) => new arrow.List(new arrow.Field("item", t, true));
const fixedList = (n, t) => new arrow.FixedSizeList(n, new arrow.Field("item", t, true));
const column = (name, type, values) => ({ name, type, values });

function writeParquet(file, columns) {
  const fields = columns.map((c) => new arrow.Field(c.name, c.type, true));
  const schema = new arrow.Schema(fields);
  const children = columns.map((c) => arrow.vectorFromArray(c.values, c.type).data[0]);
  const data = arrow.makeData({ type: new arrow.Struct(fields), length: columns[0].values.length,
                                nullCount: 0, children });
  const table = new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
  // Snappy and v1 pages: what LeRobot's pyarrow writer uses by default.
  const props = new pq.WriterPropertiesBuilder().setCompression(pq.Compression.SNAPPY)
    .setWriterVersion(pq.WriterVersion.V1).build();
  const bytes = pq.writeParquet(pq.Table.fromIPCStream(arrow.tableToIPC(table, "stream")), props);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
}
const writeJson = (file, v) => {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(v, null, 4) + "\n");
};
const writeJsonl = (file, rows) => {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
};

// Values a float32 holds exactly, different in every episode, frame and dimension.
const stateValue = (e, f, k) => Math.fround(e * 100 + f + k / 32);
const actionValue = (e, f, k) => Math.fround(-(e * 100 + f) - k / 64 - 0.5);
const episodes = LENGTHS.map((length, e) => ({
  index: e, length, tasks: episodeTasks(e),
  state: Array.from({ length }, (_, f) => Array.from({ length: DIM }, (_, k) => stateValue(e, f, k))),
  action: Array.from({ length }, (_, f) => Array.from({ length: DIM }, (_, k) => actionValue(e, f, k))),
}));

// The frame table of `eps`; `listType` is how the vectors are typed (LeRobot has written both).
// `edit(columns)` may damage the values.
function frameColumns(eps, listType, firstIndex) {
  const cols = { "observation.state": [], action: [], timestamp: [], frame_index: [],
                 episode_index: [], index: [], task_index: [] };
  let global = firstIndex;
  for (const ep of eps) {
    for (let f = 0; f < ep.length; ++f) {
      cols["observation.state"].push(ep.state[f]);
      cols.action.push(ep.action[f]);
      cols.timestamp.push(Math.fround(f / FPS));
      cols.frame_index.push(BigInt(f));
      cols.episode_index.push(BigInt(ep.index));
      cols.index.push(BigInt(global++));
      cols.task_index.push(BigInt(TASKS.indexOf(ep.tasks[0])));
    }
  }
  return cols;
}
function toColumns(cols, listType) {
  return [
    column("observation.state", listType, cols["observation.state"]),
    column("action", listType, cols.action),
    column("timestamp", F32(), cols.timestamp),
    column("frame_index", I64(), cols.frame_index),
    column("episode_index", I64(), cols.episode_index),
    column("index", I64(), cols.index),
    column("task_index", I64(), cols.task_index),
  ];
}
const firstIndex = (e) => LENGTHS.slice(0, e).reduce((a, b) => a + b, 0);

function features() {
  const vec = (name) => ({ dtype: "float32", shape: [DIM],
                           names: Array.from({ length: DIM }, (_, k) => `${name}_${k}`) });
  const scalar = (dtype) => ({ dtype, shape: [1], names: null });
  return {
    action: vec("motor"),
    "observation.state": vec("joint"),
    [CAMERA]: { dtype: "video", shape: [HEIGHT, WIDTH, 3], names: ["height", "width", "channels"],
                info: { "video.height": HEIGHT, "video.width": WIDTH, "video.codec": "mpeg4",
                        "video.pix_fmt": "yuv420p", "video.is_depth_map": false, "video.fps": FPS,
                        "video.channels": 3, has_audio: false } },
    timestamp: scalar("float32"),
    frame_index: scalar("int64"),
    episode_index: scalar("int64"),
    index: scalar("int64"),
    task_index: scalar("int64"),
  };
}
const totalFrames = LENGTHS.reduce((a, b) => a + b, 0);

// min, max, mean, std (population) and count per dimension of a list of rows.
function vectorStats(rows) {
  const dim = rows[0].length, n = rows.length;
  const st = { min: [], max: [], mean: [], std: [], count: [n] };
  for (let k = 0; k < dim; ++k) {
    const v = rows.map((r) => r[k]);
    const mean = v.reduce((a, b) => a + b, 0) / n;
    st.min.push(Math.min(...v));
    st.max.push(Math.max(...v));
    st.mean.push(mean);
    st.std.push(Math.sqrt(v.reduce((a, b) => a + (b - mean) * (b - mean), 0) / n));
  }
  return st;
}

// ---- v2.1: one parquet and one mp4 per episode, chunks of 2 episodes -------------------------
const CHUNK21 = 2;
const pad = (n, w) => String(n).padStart(w, "0");
const v21 = path.join(outDir, "v21");
fs.rmSync(v21, { recursive: true, force: true });
writeJson(path.join(v21, "meta/info.json"), {
  codebase_version: "v2.1", robot_type: "test_arm", total_episodes: LENGTHS.length,
  total_frames: totalFrames, total_tasks: TASKS.length, total_videos: LENGTHS.length,
  total_chunks: Math.ceil(LENGTHS.length / CHUNK21), chunks_size: CHUNK21, fps: FPS,
  splits: { train: `0:${LENGTHS.length}` },
  data_path: "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
  video_path: "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
  features: features(),
});
writeJsonl(path.join(v21, "meta/episodes.jsonl"),
           episodes.map((ep) => ({ episode_index: ep.index, tasks: ep.tasks, length: ep.length })));
writeJsonl(path.join(v21, "meta/tasks.jsonl"),
           TASKS.map((task, i) => ({ task_index: i, task })));
// Per-episode statistics as LeRobot's compute_episode_stats writes them (population std).
const episodeStats = (ep) => ({ action: vectorStats(ep.action),
                                "observation.state": vectorStats(ep.state) });
writeJsonl(path.join(v21, "meta/episodes_stats.jsonl"),
           episodes.map((ep) => ({ episode_index: ep.index, stats: episodeStats(ep) })));
// The same with one value that does not describe the frames: episode 2's state max[0], the
// largest of the dataset.
{
  const rows = episodes.map((ep) => ({ episode_index: ep.index, stats: episodeStats(ep) }));
  rows[2].stats["observation.state"].max[0] += 50;
  writeJsonl(path.join(outDir, "bad/v21_episodes_stats_disagree.jsonl"), rows);
}
const videos21 = [];
for (const ep of episodes) {
  const chunk = pad(Math.floor(ep.index / CHUNK21), 3);
  writeParquet(path.join(v21, `data/chunk-${chunk}/episode_${pad(ep.index, 6)}.parquet`),
               toColumns(frameColumns([ep], list(F32()), firstIndex(ep.index)), list(F32())));
  videos21.push({ path: `videos/chunk-${chunk}/${CAMERA}/episode_${pad(ep.index, 6)}.mp4`,
                  episodes: [ep.index] });
}
// Episode 1 with a gap in frame_index (frame 3 missing, 4 in its place).
{
  const cols = frameColumns([episodes[1]], list(F32()), firstIndex(1));
  cols.frame_index[3] = 4n;
  writeParquet(path.join(outDir, "bad/v21_episode_000001_frame_gap.parquet"),
               toColumns(cols, list(F32())));
}

// Episode 0 with frame 2's timestamp 2.5 frames late.
{
  const cols = frameColumns([episodes[0]], list(F32()), firstIndex(0));
  cols.timestamp[2] = Math.fround(4.5 / FPS);
  writeParquet(path.join(outDir, "bad/v21_episode_000000_late_timestamp.parquet"),
               toColumns(cols, list(F32())));
}

// ---- v3.0: episodes 0 and 1 share data file-000 and video file-000; episode 2 is in file-001 --
const v30 = path.join(outDir, "v30");
fs.rmSync(v30, { recursive: true, force: true });
const files30 = [[0, 1], [2]];
writeJson(path.join(v30, "meta/info.json"), {
  codebase_version: "v3.0", robot_type: "test_arm", total_episodes: LENGTHS.length,
  total_frames: totalFrames, total_tasks: TASKS.length, chunks_size: 1000,
  data_files_size_in_mb: 100, video_files_size_in_mb: 500, fps: FPS,
  splits: { train: `0:${LENGTHS.length}` },
  data_path: "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
  video_path: "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
  features: features(),
});
writeParquet(path.join(v30, "meta/tasks.parquet"),
             [column("task_index", I64(), TASKS.map((_, i) => BigInt(i))),
              column("task", STR(), TASKS)]);
const videos30 = [];
const meta = { episode_index: [], tasks: [], length: [], "data/chunk_index": [],
               "data/file_index": [], dataset_from_index: [], dataset_to_index: [],
               [`videos/${CAMERA}/chunk_index`]: [], [`videos/${CAMERA}/file_index`]: [],
               [`videos/${CAMERA}/from_timestamp`]: [], [`videos/${CAMERA}/to_timestamp`]: [],
               "meta/episodes/chunk_index": [], "meta/episodes/file_index": [] };
files30.forEach((eps, file) => {
  writeParquet(path.join(v30, `data/chunk-000/file-${pad(file, 3)}.parquet`),
               toColumns(frameColumns(eps.map((e) => episodes[e]), fixedList(DIM, F32()),
                                      firstIndex(eps[0])), fixedList(DIM, F32())));
  videos30.push({ path: `videos/${CAMERA}/chunk-000/file-${pad(file, 3)}.mp4`, episodes: eps });
  let t = 0;
  for (const e of eps) {
    const ep = episodes[e];
    meta.episode_index.push(BigInt(e));
    meta.tasks.push(ep.tasks);
    meta.length.push(BigInt(ep.length));
    meta["data/chunk_index"].push(0n);
    meta["data/file_index"].push(BigInt(file));
    meta.dataset_from_index.push(BigInt(firstIndex(e)));
    meta.dataset_to_index.push(BigInt(firstIndex(e) + ep.length));
    meta[`videos/${CAMERA}/chunk_index`].push(0n);
    meta[`videos/${CAMERA}/file_index`].push(BigInt(file));
    meta[`videos/${CAMERA}/from_timestamp`].push(t);
    meta[`videos/${CAMERA}/to_timestamp`].push(t + ep.length / FPS);
    meta["meta/episodes/chunk_index"].push(0n);
    meta["meta/episodes/file_index"].push(0n);
    t += ep.length / FPS;
  }
});
const metaTypes = { tasks: list(STR()), [`videos/${CAMERA}/from_timestamp`]: F64(),
                    [`videos/${CAMERA}/to_timestamp`]: F64() };
writeParquet(path.join(v30, "meta/episodes/chunk-000/file-000.parquet"),
             Object.entries(meta).map(([name, values]) => column(name, metaTypes[name] ?? I64(), values)));

// v3.0 keeps the dataset's statistics whole in meta/stats.json (LeRobot also writes quantiles
// and image statistics there; the importer compares action and observation.state only).
const allRows = (field) => episodes.flatMap((ep) => ep[field]);
const stats30 = { action: { ...vectorStats(allRows("action")), q01: [0] },
                  "observation.state": vectorStats(allRows("state")),
                  timestamp: vectorStats(allRows("state").map(() => [0])) };
writeJson(path.join(v30, "meta/stats.json"), stats30);
// The same with action's std of dimension 3 doubled: statistics that disagree with the frames.
{
  const bad = structuredClone(stats30);
  bad.action.std[3] *= 2;
  writeJson(path.join(outDir, "bad/v30_stats_disagree.json"), bad);
}

writeJson(path.join(outDir, "expected.json"), {
  fps: FPS, camera: CAMERA, height: HEIGHT, width: WIDTH, dim: DIM, episodes,
  videos: { v21: videos21, v30: videos30 },
});
console.log(`wrote LeRobot v2.1 and v3.0 datasets to ${outDir}`);
