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

#include "common/status.h"

namespace api {

enum class JobKind { kTrain, kRl, kEval, kCommand };
const char* JobKindName(JobKind k);

struct Resources {
  int nodes = 1;
  int ranks_per_node = 1;
  std::string slot_type = "cpu";  // "cpu" | "gpu"
  int slots_per_rank = 1;

  int TotalRanks() const { return nodes * ranks_per_node; }
  int SlotsPerNode() const { return ranks_per_node * slots_per_rank; }
};

// Options of the built-in engine (kind "train"). Names follow docs/api/openapi.yaml.
struct ModelOptions {
  int d_model = 128;        // hidden width
  int layers = 2;           // hidden layers of the policy network
  int action_horizon = 16;  // actions predicted per observation (an action chunk)
  int action_dim = 7;
};
struct DataOptions {
  std::string dataset = "sim:reach";  // built-in scripted task
  int rows_per_step = 64;             // samples per rank per optimizer step
};
struct OptimOptions {
  double lr = 1e-3;
  int steps = 200;
  int warmup_steps = 10;
  double weight_decay = 0.01;
};
struct CheckpointOptions {
  int every_steps = 0;  // 0: only at the end
  int keep = 3;
};
struct EngineOptions {
  ModelOptions model;
  DataOptions data;
  OptimOptions optim;
  CheckpointOptions checkpoint;
  uint64_t seed = 0;
};

struct JobSpec {
  std::string name;
  JobKind kind = JobKind::kTrain;
  Resources resources;
  int priority = 50;     // 0..100, higher runs first
  int max_restarts = 0;  // restarts after node loss
  EngineOptions engine;               // kind train
  std::vector<std::string> command;   // kind command: argv run under mpirun
};

// Per-job maxima configured by the operator (server flags).
struct SpecLimits {
  int max_nodes = 64;
  int max_ranks = 1024;
  int max_slots_per_rank = 64;
  int max_steps = 10'000'000;
  size_t max_body_bytes = 256 * 1024;
};

common::Result<JobSpec> ParseJobSpec(const nlohmann::json& j, const SpecLimits& limits);
// Parses raw request bytes: oversize bodies and malformed JSON are invalid_argument too.
common::Result<JobSpec> ParseJobSpecText(const std::string& body, const SpecLimits& limits);
nlohmann::json ToJson(const JobSpec& spec);

}  // namespace api
