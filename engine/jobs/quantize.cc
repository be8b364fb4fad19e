// `embody-engine quantize --in CKPT --out CKPT8` (job.h): post-training quantisation of a trained
// policy's checkpoint into an FP8 checkpoint (engine/policy/ptq.h), then, for a policy trained on
// the built-in task, the fp32 and fp8 policies on the same held-out batch side by side.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "api/dataset_ref.h"
#include "common/file_util.h"
#include "common/time_util.h"
#include "engine/format/checkpoint.h"
#include "engine/jobs/job.h"
#include "engine/model/policy_options.h"
#include "engine/policy/ptq.h"

namespace engine::jobs {
namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "embody-engine quantize: %s\n", msg.c_str());
  return code;
}

}  // namespace

int Quantize(int argc, char** argv) {
  CLI::App app{
      "Quantises a trained policy's checkpoint into an FP8 checkpoint (E4M3, 128 x 128 "
      "weight blocks, fp32 scales) and compares fp32 and fp8 actions on held-out data.",
      "embody-engine quantize"};
  std::string in, out;
  int eval_samples = 64;
  PtqOptions options;
  app.add_option("--in", in, "the fp32 training checkpoint (step-N.ckpt)")->required();
  app.add_option("--out", out, "where to write the FP8 checkpoint")->required();
  app.add_option("--eval-samples", eval_samples,
                 "held-out samples to compare fp32 and fp8 on (0: none)")
      ->check(CLI::Range(0, 4096));
  app.add_flag("--embeddings", options.embeddings,
               "also quantise the input embeddings' Linears (patch, state, action, time)");
  app.add_flag("--action-head", options.action_head, "also quantise the action head");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  auto ck = LoadCheckpoint(in);
  if (!ck.ok()) return Fail(1, ck.status().ToString());
  auto e = EngineOptionsFromCheckpointConfig(ck->config);
  if (!e.ok()) return Fail(1, in + ": " + e.status().ToString());
  auto config = PolicyConfigFromOptions(*e);
  if (!config.ok()) return Fail(1, config.status().ToString());
  auto model = PolicyTransformer::Create(*config);
  if (!model.ok()) return Fail(1, model.status().ToString());
  if (ck->params.size() != (*model)->num_params()) {
    return Fail(1, in + " holds " + std::to_string(ck->params.size()) +
                       " parameters; its config's model has " +
                       std::to_string((*model)->num_params()));
  }
  std::copy(ck->params.begin(), ck->params.end(), (*model)->params());

  QuantizedPolicy summary;
  const double t0 = common::MonotonicSeconds();
  auto q = QuantizeToFp8Checkpoint(**model, ck->step, ck->config, options, &summary);
  if (!q.ok()) return Fail(1, q.status().ToString());
  const double quantize_s = common::MonotonicSeconds() - t0;
  auto written = SaveFp8Checkpoint(out, *q);
  if (!written.ok()) return Fail(1, written.status().ToString());
  auto source_bytes = common::ReadFile(in);
  const double source_size = source_bytes.ok() ? static_cast<double>(source_bytes->size()) : 0.0;
  const fp8::Fp8Stats& s = summary.stats;
  std::printf("quantised %zu tensors (%lld weights) in %.3f s: weights %zu -> %zu bytes (%.3fx)\n",
              q->config["fp8"]["quantized"].size(), static_cast<long long>(s.elements), quantize_s,
              summary.fp32_bytes, summary.fp8_bytes,
              static_cast<double>(summary.fp32_bytes) / summary.fp8_bytes);
  std::printf("  amax %.4g, scales %.4g..%.4g, saturated %lld, underflowed %lld, NaN %lld\n",
              s.amax, s.scale_min, s.scale_max, static_cast<long long>(s.saturated),
              static_cast<long long>(s.underflowed), static_cast<long long>(s.nan));
  std::printf("  %s: %lld bytes (%s: %.0f bytes, %.2fx, optimizer state included)\n", out.c_str(),
              static_cast<long long>(*written), in.c_str(), source_size,
              source_size / static_cast<double>(*written));
  nlohmann::json line = {{"bench", "ptq"},
                         {"weight_bytes_fp32", summary.fp32_bytes},
                         {"weight_bytes_fp8", summary.fp8_bytes},
                         {"file_bytes", *written},
                         {"source_file_bytes", source_size},
                         {"stats", Fp8StatsJson(s)}};

  const bool builtin =
      api::ParseDatasetRef(e->data.dataset).value().kind == api::DatasetRef::Kind::kSimReach;
  if (eval_samples > 0 && builtin) {
    // From the file just written, as evaluation and rollout will load it.
    auto reread = LoadFp8Checkpoint(out);
    if (!reread.ok()) return Fail(1, reread.status().ToString());
    auto fp8_model = PolicyFromFp8Checkpoint(*reread, nullptr);
    if (!fp8_model.ok()) return Fail(1, fp8_model.status().ToString());
    auto c = CompareFp8Eval(**model, **fp8_model, *e, eval_samples);
    if (!c.ok()) return Fail(1, c.status().ToString());
    std::printf(
        "eval: %d held-out samples, %d Euler steps: action MSE fp32 %.5f, fp8 %.5f (%.4fx); "
        "fp8 vs fp32 actions relative L2 %.4f\n",
        c->fp32.samples, c->fp32.euler_steps, c->fp32.action_mse, c->fp8.action_mse, c->mse_ratio,
        c->relative_l2);
    line["eval_samples"] = c->fp32.samples;
    line["action_mse_fp32"] = c->fp32.action_mse;
    line["action_mse_fp8"] = c->fp8.action_mse;
    line["relative_l2"] = c->relative_l2;
  } else if (eval_samples > 0) {
    std::printf("eval: skipped (held-out samples exist for the built-in task only)\n");
  }
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

}  // namespace engine::jobs
