// Trainer: the engine's training loop for kind "train" jobs.
//
// Model: the policy transformer (engine/model/policy_transformer.h) with the flow-matching action
// head, shaped by engine.model and engine.attention (PolicyConfigFromOptions).
//
// Data: one global sample stream (engine/data/loader.h). Each step consumes the next
// SamplesPerRank × world samples; each rank takes its contiguous slice, and a background loader
// thread turns it into the model's PackedBatch (engine/batches/train_batches.h: multimodal samples
// of the scripted reach task, packed best-fit decreasing or padded one per row), keeping batches
// prefetched and recycling their buffers. With engine.data.dataset "dir:/path" the stream is the
// dataset's epochs, each shuffled by the seed (engine/data/dataset_stream.h); packing plans from
// the token counts alone, and background threads read and decode the rank's samples ahead of the
// loader (DatasetSampleReader). A read error on any rank (a checksum mismatch names the shard
// file and episode) ends the run on every rank at the same step.
//
// Step: forward; GradBuckets (engine/dist/grad_buckets.h) starts with this rank's loss weight
// (Σ action-token weights × action_dim); backward reports each layer's gradients as final in
// reverse layer order and each report starts the bucketed MPI_Iallreduce of finished buckets while
// backward goes on with earlier layers; Finish leaves every rank with the gradient of the global
// per-token mean loss (with engine.fp8.allreduce the buckets go over the wire as fp8 with error
// feedback, engine/dist/fp8_allreduce.h, and checkpoints store every rank's residual); every rank
// applies the same AdamW update. Parameters start identical (same
// seed) and so stay bitwise identical on every rank. Rank 0 alone reports step events (loss,
// real tokens/s, padding, phase times, MFU against a GEMM rate measured at start-up), prints
// progress, writes checkpoints and, at the end, evaluates sampled actions on held-out data
// (engine/policy/held_out_eval.h) and reports an `eval` event.
//
// Resume: with resume_from set, rank 0 reads the checkpoint and broadcasts it; every rank restores
// parameters, AdamW state, the step and the data position, and the run continues to
// engine.optim.steps. The checkpoint may come from a different number of ranks: the stream goes
// on from the same global sample, split over the new ranks. On a dataset that means the same
// epoch, at the same place in its shuffled order: with the same global batch (samples per rank
// × ranks) the resumed run takes exactly the batches the interrupted one would have; with a
// different global batch it takes the same samples in the same order, cut into steps
// differently. The checkpoint also names the dataset (its sample count and a fingerprint of its
// shards), and a resume on another dataset is refused.
//
// The parts are units of their own (docs/engine.md, "The trainer's parts"): the step is
// engine/train/train_step.h (its figures StepStats, engine/train/step_stats.h), the data
// engine/train/train_data.h, resuming engine/train/resume.h, checkpoints
// engine/train/checkpointer.h, the evaluation after the last step engine/train/final_eval.h; Train
// wires them in one loop.
//
// Runs with any Communicator, so tests train in one process with LocalCommunicator.
#pragma once

#include <atomic>

#include <cstdint>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/policy/held_out_eval.h"
#include "engine/policy/ptq.h"
#include "engine/report/event_sink.h"

namespace engine {

struct TrainerOptions {
  api::EngineOptions engine;
  // Where rank 0 writes step-<N>.ckpt files; empty: no checkpoints.
  std::string checkpoint_dir;
  // Rank 0 prints a progress line to stdout every log_every steps and at the last step;
  // 0 picks max(1, steps / 20).
  int log_every = 0;
  bool print_progress = true;
  // A checkpoint file to continue from (main.cc: EMBODY_RESUME_FROM); empty: start fresh.
  std::string resume_from;
  // Continue from the newest checkpoint in resume_from's directory at or after it instead of
  // exactly resume_from: a restart after node loss names the latest checkpoint the control plane
  // heard of, and the run may have written (and pruned down to) newer ones since.
  bool resume_newest = false;
  // Gradient all-reduce bucket size, and batches the loader keeps ready.
  size_t grad_bucket_bytes = size_t{2} << 20;
  int prefetch = 2;
  // Threads that read and decode dataset samples ahead of the loader (dataset jobs only).
  int read_threads = 2;
  // Measure this machine's GEMM rate at start-up (~0.25 s per rank) and report mfu in step
  // events; without it step events carry no mfu.
  bool measure_gemm_ceiling = false;
  // Held-out samples rank 0 evaluates with the flow-matching sampler after the last step; 0: no
  // evaluation. Built-in stream only: held-out reach tasks come from the simulator.
  int eval_samples = 0;
  // Set (from a signal handler: main.cc on SIGTERM) to stop early: the ranks agree at the end of
  // the step in which any of them saw it, write a checkpoint of that step, skip the evaluation
  // and return with TrainResult::stopped. Null: never.
  const std::atomic<bool>* stop_requested = nullptr;
};

struct TrainResult {
  int64_t first_step = 0;     // steps already done when this run started (from the checkpoint)
  std::vector<float> losses;  // global per-token mean loss, one per step run (on every rank)
  // Global step totals, one per step run (on every rank).
  std::vector<int64_t> real_tokens;
  std::vector<float> params;         // final parameters
  uint64_t next_sample = 0;          // data position at the end: global index of the next sample
  uint64_t epoch = 0, in_epoch = 0;  // the same position on a dataset (0 for the built-in stream)
  double data_wait_seconds = 0.0;    // this rank's time waiting for the loader
  double mean_step_seconds = 0.0;
  double tokens_per_s = 0.0;    // global real tokens per second, over the whole run
  double samples_per_s = 0.0;   // global, over the whole run
  double padding_ratio = 0.0;   // global padding slots / slots, over the whole run
  double gemm_gflops = 0.0;     // the measured GEMM rate summed over ranks (0: not measured)
  std::string last_checkpoint;  // absolute path on rank 0; empty elsewhere or without checkpoints
  bool evaluated = false;       // rank 0 with eval_samples > 0
  bool stopped = false;         // ended early on stop_requested, after a checkpoint
  EvalResult eval;
  // engine.fp8.inference, rank 0: the FP8 checkpoint written (empty without a checkpoint
  // directory), what quantising did, and the fp8 policy on the evaluation's held-out batch.
  std::string fp8_checkpoint;
  QuantizedPolicy fp8_summary;
  bool fp8_evaluated = false;
  Fp8EvalComparison fp8_eval;
};

// Trains for engine.optim.steps steps. `events` receives rank 0's step and checkpoint events and
// may be null (also on other ranks, where it is ignored). Errors: bad options (invalid_argument),
// checkpoint I/O (rank 0 returns it, the others failed_precondition),
// a non-finite loss (internal, on every rank), a checkpoint to resume from that cannot be read or
// does not fit the options (invalid_argument / not_found, on every rank), a dataset that cannot be
// opened or read (the failing rank returns the error naming the file; the others
// failed_precondition naming that rank). Rank 0 alone evaluates at the end; its errors are rank
// 0's only.
//
// *failed_on_every_rank (when given) says, on failure, whether every rank returned an error at
// the same point (nothing is left waiting in a collective: each can exit normally) or only this
// one did (a batch the model refused, the evaluation), so the caller must abort the others.
common::Result<TrainResult> Train(const TrainerOptions& options, Communicator& comm,
                                  EventSink* events, bool* failed_on_every_rank = nullptr);

}  // namespace engine
