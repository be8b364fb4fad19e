// JobSpec: what a tenant asks Embody to run, and the complete validation of it.
//
// ParseJobSpec is the only way a JobSpec enters the system (server on POST /v1/jobs, engine on
// --spec). It rejects unknown fields, wrong types, impossible resources and options for features
// that are not built yet, each with the dotted path of the offending field. A spec that parses is
// complete: every default is filled in, and ToJson(spec) round-trips through ParseJobSpec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/dataset_ref.h"
#include "common/status.h"

namespace api {

// kImport is made by the server for POST /v1/datasets only (a client submitting one is refused).
enum class JobKind { kTrain, kRl, kEval, kCommand, kImport };
const char* JobKindName(JobKind k);

struct Resources {
  int nodes = 1;
  int ranks_per_node = 1;
  std::string slot_type = "cpu";  // "cpu" | "gpu"
  int slots_per_rank = 1;
  // Memory limit of each rank in bytes, enforced by the node (cgroup memory.max where the node
  // delegates cgroups, RLIMIT_AS otherwise); 0: no limit beyond the node's.
  int64_t memory_per_rank_bytes = 0;

  int TotalRanks() const { return nodes * ranks_per_node; }
  int SlotsPerNode() const { return ranks_per_node * slots_per_rank; }
};

// Options of the built-in engine (kind "train"). Names follow docs/api/openapi.yaml.
struct ModelOptions {
  int d_model = 128;        // hidden width
  int layers = 2;           // transformer blocks
  int heads = 4;            // attention heads; must divide d_model, head dim ≤ 128
  int mlp = 512;            // MLP width of a block; 4·d_model when the spec gives d_model only
  int action_horizon = 16;  // actions predicted per observation (an action chunk)
  int action_dim = 7;
  std::string action_head = "flow";  // flow matching (the Gaussian RL head is not built yet)
  // Euler steps of the flow-matching sampler at inference (GR00T N1.5 uses 4, π0 10).
  int inference_steps = 4;
};
// engine.data.demo_noise's default (engine/sim/sim_samples.h).
inline constexpr double kDefaultDemoNoise = 0.2;

struct DataOptions {
  // "sim:reach", "sim:push", "sim:pick_place" (built-in tasks), "dir:/abs/path" (a dataset made
  // by embody-data) or
  // "dataset:NAME[@VERSION]" (a stored dataset of the job's tenant, resolved by the server at
  // submit and launched as "dir:PATH"); parsed by api/dataset_ref.h.
  std::string dataset = "sim:reach";
  // Rows per rank per optimizer step. Packing: each rank takes the number of samples whose mean
  // length (the built-in distribution's, action chunk included) fills rows_per_step rows of
  // tokens_per_row, packed best-fit decreasing (so a step holds about rows_per_step rows, a few
  // percent more when packing leaves gaps). No packing: rows_per_step samples, one per row, each
  // row padded to the step's longest sample.
  int rows_per_step = 8;
  // Pack several samples into each row of tokens_per_row tokens (best-fit decreasing); false:
  // one sample per row, padded.
  bool packing = true;
  int tokens_per_row = 512;  // packed row length; the longest row either way

  // How a "dir:" dataset's episodes become policy samples (docs/engine.md, "Training on a
  // dataset"); not allowed with "sim:reach". Keys are obs keys, written "obs/<name>" (a bare
  // name gets the prefix).
  // Camera keys (u8, (H, W, C)) in token order; empty: every image key of the dataset.
  std::vector<std::string> cameras;
  // Low-dimensional keys concatenated into the state token (normalised by the dataset's
  // statistics, zero-padded to 16); empty: robomimic's eef pos/quat + gripper qpos, or LIBERO's
  // joint + gripper states, or else every low-dim obs key.
  std::vector<std::string> proprio;
  // Cameras are resized to image_size × image_size (a multiple of 8: the model's 8×8 patches),
  // i.e. (image_size/8)² patch tokens per camera.
  int image_size = 32;
  // Instruction for episodes that carry none (robomimic files have none; LIBERO's come from the
  // file). Empty: such samples have no language tokens.
  std::string language;
  // "sim:push" and "sim:pick_place" only: the largest perturbation of the demonstrations, in
  // action units (1 = 3 cm a step), 0..1. Each episode's motion is the expert's plus Gaussian
  // noise of a standard deviation drawn from [0, demo_noise] (docs/sim.md); wider noise labels
  // more of the states a cloned policy drifts into (docs/eval.md, "Why push success fell").
  double demo_noise = kDefaultDemoNoise;
};

inline constexpr int kMaxDatasetKeys = 16;
inline constexpr int kMinImageSize = 8;
inline constexpr int kMaxImageSize = 128;
// kMaxLanguageBytes (engine.data.language, an import's language) is in api/dataset_ref.h.

// Limits the engine's model and data impose on a spec. Samples of the built-in dataset hold up
// to kSimReachMaxContextTokens context tokens (engine/data/embodied_lengths.h, checked by the
// engine's tests) plus action_horizon action tokens; positions restart per sample and the model
// has kMaxPositions of them.
inline constexpr int kSimReachMaxContextTokens = 285;
inline constexpr int kMaxPositions = 512;
inline constexpr int kMaxHeadDim = 128;
inline constexpr int64_t kMinMemoryPerRankBytes = 16LL << 20;   // 16 MiB
inline constexpr int64_t kMaxMemoryPerRankBytes = 16LL << 40;   // 16 TiB
inline constexpr int64_t kMaxTimeLimitSeconds = 365LL * 24 * 3600;
inline constexpr int kMaxCommandDatasets = 16;

struct OptimOptions {
  double lr = 1e-3;
  int steps = 200;
  int warmup_steps = 10;
  double weight_decay = 0.01;
};
struct CheckpointOptions {
  int every_steps = 0;  // 0: only at the end
  // Checkpoints kept: by the engine in the job's directory, and by the server's blob store
  // (the newest `keep`, plus the best by `best_metric` when one is named).
  int keep = 3;
  // A number the job reports with its steps (e.g. "loss"): the server's retention also keeps the
  // checkpoint with its lowest value ("min") or highest ("max"). Empty: newest `keep` only.
  std::string best_metric;
  std::string best_mode = "min";
};
// engine.fp8 (docs/fp8.md). With `inference` the job quantises its trained policy (linear layers
// of the blocks, 128 x 128 E4M3 blocks with fp32 scales), writes the FP8 checkpoint beside its
// last one, and evaluates from it. With `allreduce` the gradient all-reduce sends E4M3 codes in
// 1 x 128 blocks with fp32 scales and keeps each rank's quantisation error for the next step
// (engine/dist/fp8_allreduce.h). With `compute` the blocks' Linear products train in FP8 (E4M3
// activations and weights, E5M2 output gradients, fp32 master weights; engine/model/fp8_linear.h)
// with `scaling` "block" (per-block scales from the current amax) or "delayed" (per-tensor
// scales from the largest amax of the last `amax_history` steps); not with precision "bf16".
struct Fp8Options {
  bool inference = false;
  bool allreduce = false;
  std::string format = "e4m3";
  bool compute = false;
  std::string scaling = "block";
  int amax_history = 16;
};

// engine.rl.env_latency: every environment step takes a seeded time drawn from a lognormal
// body with a Pareto tail (engine/sim/step_latency.h), so the light simulator stands in for a
// heavy one. mean_ms 0: no latency (the default).
struct RlLatencyOptions {
  double mean_ms = 0.0;
  double jitter = 0.0;            // the body's coefficient of variation
  double tail_probability = 0.0;  // share of steps that stall
  double tail_alpha = 2.0;        // the stall's Pareto shape
  double tail_scale = 5.0;        // the stall's minimum, in multiples of mean_ms
  bool busy = false;              // spin on the core instead of sleeping
};

// engine.rl (kind "rl" only): PPO on a built-in simulated task (docs/rl.md). Per rank: `envs`
// environments; an update every rollout_steps steps of them. Without any of the three
// asynchronous levels (disaggregated, env_async, streaming) the synchronous colocated loop runs.
struct RlOptions {
  std::string task = "reach";
  int envs = 16;                    // environments per rank
  int rollout_steps = 64;           // steps per environment between updates
  int64_t total_env_steps = 65536;  // over all ranks; the run ends at the first update past it
  int episode_steps = 50;           // episode limit
  double success_radius = 0.05;     // metres
  int cameras = 1;                  // rendered views in each observation, 0..3
  double gamma = 0.99;
  double gae_lambda = 0.95;
  double clip = 0.2;  // ε of the surrogate, and of the value clip
  bool value_clip = true;
  double value_coef = 0.5;
  double entropy_coef = 0.0;
  int epochs = 4;
  int minibatches = 4;
  double lr = 3e-4;
  double max_grad_norm = 0.5;
  double init_log_std = -0.5;
  double importance_cap = 2.0;  // decoupled PPO's cap on π_prox / π_behaviour
  RlLatencyOptions env_latency;

  // Level 1 (engine.rl.disaggregated): acting and learning apart; actors run up to
  // max_staleness policy versions ahead of the learner.
  bool disaggregated = false;
  int max_staleness = 1;  // η
  // 0: the actors are threads of every rank. R > 0: the last R ranks act and the others learn
  // (engine/rl/rollout_ranks.h); R must be a multiple of the learners' count, and envs is per
  // rollout rank.
  int rollout_ranks = 0;
  // The proximal policy of decoupled PPO on steps learned stale (engine/rl/ppo.h): "behaviour"
  // (the policy that acted: the surrogate is clipped around it, as the synchronous loop's is) or
  // "current" (the learner's policy when it learns them; w = π/π_b corrects the lag).
  std::string proximal = "behaviour";
  // An update's learning rate is lr · stale_lr_scale^s, s its steps' mean staleness (all ranks):
  // lr on fresh data, a quarter of it by default on data one version old (docs/rl.md).
  double stale_lr_scale = 0.25;
  // Level 2 (engine.rl.env_async): every environment steps on its own; inference runs when
  // max_batch requests wait or the oldest has waited max_wait_ms. max_batch 0: envs.
  bool env_async = false;
  int max_batch = 0;
  double max_wait_ms = 2.0;
  // Level 3 (engine.rl.streaming): the learner's first epoch runs as trajectories arrive: a
  // global batch (PPO's minibatch, one optimiser step) is taken in micro_batches micro-batches,
  // forward/backward on each as it fills (needs disaggregated).
  bool streaming = false;
  int micro_batches = 4;

  bool any_async() const { return disaggregated || env_async || streaming; }
};

struct EngineOptions {
  ModelOptions model;
  RlOptions rl;  // kind "rl"
  Fp8Options fp8;
  DataOptions data;
  // "varlen": attention per sample over packed rows (cu_seqlens); "padded": the padded
  // baseline (needs data.packing false).
  std::string attention = "varlen";
  // The Linear layers' matrix products: "fp32", or "bf16" (bfloat16 operands, float32
  // accumulation; weights, optimiser and every other op float32). On a CPU without AVX512_BF16
  // or AMX a bf16 job runs fp32 and says so in its events (docs/engine.md, "BF16").
  std::string precision = "fp32";
  OptimOptions optim;
  CheckpointOptions checkpoint;
  uint64_t seed = 0;
  // Closed-loop evaluation during training (docs/eval.md): every eval_every steps (PPO updates
  // for kind "rl"; 0: never) rank 0 runs eval_episodes seeded episodes of the job's task (the
  // sim:* dataset's for kind "train", engine.rl.task for "rl") and adds eval_success_rate and
  // eval_mean_return to that step's event.
  int eval_every = 0;
  int eval_episodes = 16;
};

// Kind "eval" (docs/eval.md): run a checkpoint's policy on built-in simulated tasks. Exactly one
// of checkpoint_from_job (a job of the submitter's tenant: its latest ready checkpoint) and
// checkpoint (a checkpoint id of the tenant, as GET /v1/jobs/{id}/checkpoints lists them). The
// server resolves either into the spec's init_from, which is what the engine loads.
inline constexpr int kMaxEvalEpisodes = 1000;
struct EvalOptions {
  int64_t checkpoint_from_job = 0;
  int64_t checkpoint = 0;
  std::vector<std::string> tasks = {"reach"};  // "reach", "push", "pick_place"; no repeats
  int episodes = 20;                           // per task, 1..kMaxEvalEpisodes
  uint64_t seed = 0;
  bool fp8 = false;  // quantise a behaviour-cloning checkpoint to FP8 first (docs/fp8.md)
};

struct JobSpec {
  std::string name;
  JobKind kind = JobKind::kTrain;
  Resources resources;
  int priority = 50;     // 0..100, higher runs first
  int max_restarts = 0;  // restarts after node loss
  // Wall-clock limit of one attempt; the job is cancelled when it runs longer. 0: none. The
  // scheduler backfills only jobs that have one (it needs to know when their slots come back).
  int64_t time_limit_seconds = 0;
  // A ready checkpoint of the same tenant (its id in GET /v1/jobs/{id}/checkpoints) the job
  // starts from instead of step 0: parameters, optimizer state and data position, on any number
  // of ranks. For kind "rl": the behaviour-cloning checkpoint the policy's trunk loads. 0: none.
  int64_t init_from = 0;
  EngineOptions engine;               // kinds train and rl
  EvalOptions eval;                   // kind eval
  std::vector<std::string> command;   // kind command: argv run under mpirun
  // Kind command: stored datasets of the job's tenant, "dataset:NAME[@VERSION]" each (at most
  // kMaxCommandDatasets, no version named twice). The server binds each to its ready version at
  // submit, as it does a train job's engine.data.dataset; the ranks find the versions'
  // directories in EMBODY_DATASETS (docs/byo.md), which embody.data.open("dataset:NAME") reads.
  std::vector<std::string> datasets;
  // Kind command: how the ranks start. "mpirun": one process per rank (exec-rank sets RANK,
  // WORLD_SIZE, ... from Open MPI's). "torchrun": one process per node running
  // `python3 -m torch.distributed.run` with the node's ranks_per_node workers, the job's nodes,
  // this node's rank and a static rendezvous at MASTER_ADDR:MASTER_PORT, elastic restarts off;
  // `command` is then the script and its arguments as torchrun takes them.
  std::string launcher = "mpirun";
  // Kind command: "environment": {"python": DIR}, a Python virtualenv (absolute, no "..") whose
  // bin/ comes first on every rank's PATH, with VIRTUAL_ENV=DIR, so the job's python3 is the
  // venv's. The agent refuses to start the job when DIR/bin/python3 is not there for the job's
  // uid to read and execute. "": the node's own python3.
  std::string python_env;
  // Kind command: "environment": {"image": "NAME[@VERSION]"}, a stored OCI image of the job's
  // tenant (a dataset version of format "oci", docs/byo.md "Environments"): every rank runs
  // inside it under crun, as the job's uid. The server binds it to its ready version at submit,
  // as it binds "datasets"; without a version, the newest ready one. "": the node's own files.
  // At most one of python_env and image.
  std::string image;
  // Kind import: which dataset record the job fills and from what. The agent writes the
  // result to <dataset root>/tenant-<tenant>/dataset-<dataset_id>.
  int64_t import_dataset_id = 0;
  ImportSource import_source;
};

// Per-job maxima configured by the operator (server flags).
struct SpecLimits {
  int max_nodes = 64;
  int max_ranks = 1024;
  int max_slots_per_rank = 64;
  int max_steps = 10'000'000;
  size_t max_body_bytes = 256 * 1024;
};

// A command job's "environment.python" as the server accepts it: an absolute path, at most 4096
// bytes, without a "." or ".." component, ':' (PATH's separator) or control characters; a
// trailing '/' is dropped. The agent checks what it is given again.
common::Result<std::string> ParsePythonEnvironment(const std::string& path,
                                                   const std::string& field);

common::Result<JobSpec> ParseJobSpec(const nlohmann::json& j, const SpecLimits& limits);
// Parses raw request bytes: oversize bodies and malformed JSON are invalid_argument too.
common::Result<JobSpec> ParseJobSpecText(const std::string& body, const SpecLimits& limits);
nlohmann::json ToJson(const JobSpec& spec);

}  // namespace api
