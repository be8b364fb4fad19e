// dump_packed_plan: writes the packed training data of N steps as JSON, so the PyTorch reference
// (bench/torch_policy.py) and the C++ engine train on identical batches.
//
// The plans come from the engine's loader (engine/data/loader.h, MakePlan): each step takes the
// next --samples-per-step samples of the global stream of --seed, draws each one's composition
// from the built-in embodied length distribution, adds --action-tokens action tokens, and packs
// them (best-fit decreasing) into rows of --tokens-per-row. Only the layout is written (lengths,
// compositions, per-sample seeds); content (token ids, patches, actions) is derived from the
// per-sample seed by whoever materialises the batch.
//
//   dump_packed_plan [--steps 16] [--samples-per-step 48] [--tokens-per-row 512]
//                    [--action-tokens 16] [--seed 1] [--world 1] [--out plan.json]
//                    (default: stdout)
// --world W: the step's samples are split over W ranks and each rank's slice is packed on its
// own, as the trainer on W ranks does; a step lists rank 0's rows, then rank 1's, ... (so one
// process training on all of a step's rows sees exactly the W ranks' batches together).
//
// JSON: {"config": {...}, "steps": [{"step", "global_begin", "real_tokens", "efficiency",
//        "rows": [[{"id", "seed", "language", "cameras", "frames", "patches_per_camera",
//                   "state_tokens_per_frame", "action_tokens", "tokens"}, ...], ...]}]}
// A row lists its samples in order; their tokens sum to at most tokens_per_row. Seeds are
// written as decimal strings (JSON readers may lose 64-bit integers).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/data/loader.h"

int main(int argc, char** argv) {
  engine::data::PlanConfig config;
  config.seed = 1;
  config.samples_per_step = 48;
  config.tokens_per_row = 512;
  config.action_tokens = 16;
  int steps = 16;
  int world = 1;
  std::string out_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--steps") {
      steps = std::atoi(v);
    } else if (flag == "--samples-per-step") {
      config.samples_per_step = std::atoll(v);
    } else if (flag == "--tokens-per-row") {
      config.tokens_per_row = std::atoi(v);
    } else if (flag == "--action-tokens") {
      config.action_tokens = std::atoi(v);
    } else if (flag == "--seed") {
      config.seed = std::strtoull(v, nullptr, 10);
    } else if (flag == "--world") {
      world = std::atoi(v);
    } else if (flag == "--out") {
      out_path = v;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  nlohmann::json doc;
  doc["config"] = {{"seed", std::to_string(config.seed)},
                   {"samples_per_step", config.samples_per_step},
                   {"tokens_per_row", config.tokens_per_row},
                   {"world", world},
                   {"action_tokens", config.action_tokens},
                   {"max_sample_tokens", config.lengths.MaxTokens() + config.action_tokens}};
  doc["steps"] = nlohmann::json::array();
  uint64_t next = 0;
  config.world = world;
  for (int s = 0; s < steps; ++s) {
    nlohmann::json rows = nlohmann::json::array();
    int64_t real = 0, slots = 0;
    uint64_t begin = next;
    for (int rank = 0; rank < world; ++rank) {
      config.rank = rank;
      auto plan = engine::data::MakePlan(config, s, begin);
      if (!plan.ok()) {
        std::fprintf(stderr, "dump_packed_plan: %s\n", plan.status().ToString().c_str());
        return 2;
      }
      next = plan->global_end;
      real += plan->real_tokens();
      slots += static_cast<int64_t>(plan->rows.num_rows()) * config.tokens_per_row;
      for (int r = 0; r < plan->rows.num_rows(); ++r) {
        nlohmann::json row = nlohmann::json::array();
        for (int32_t i : plan->rows.Row(r)) {
          const auto& c = plan->compositions[i];
          row.push_back({{"id", plan->SampleId(i)},
                         {"seed", std::to_string(plan->sample_seeds[i])},
                         {"language", c.language_tokens},
                         {"cameras", c.cameras},
                         {"frames", c.frames},
                         {"patches_per_camera", c.patch_tokens_per_camera},
                         {"state_tokens_per_frame", c.state_tokens_per_frame},
                         {"action_tokens", config.action_tokens},
                         {"tokens", plan->lengths[i]}});
        }
        rows.push_back(std::move(row));
      }
    }
    doc["steps"].push_back({{"step", s},
                            {"global_begin", begin},
                            {"real_tokens", real},
                            {"efficiency", slots > 0 ? static_cast<double>(real) / slots : 1.0},
                            {"rows", std::move(rows)}});
  }
  if (out_path.empty()) {
    std::cout << doc.dump() << "\n";
  } else {
    std::ofstream f(out_path);
    f << doc.dump() << "\n";
    if (!f) {
      std::fprintf(stderr, "dump_packed_plan: cannot write %s\n", out_path.c_str());
      return 1;
    }
  }
  return 0;
}
