// planner_calibrate: fits the planner's CPU terms (planner/step_model.h) on this machine and
// checks its predictions against measured runs; driven by bench/planner_calibrate.sh.
//
//   planner_calibrate FIT.json[,FIT.json...] PROBE.json RUN.json...
//
// FIT.json: train_throughput's last line for one rank; the first is the reference shape. The
// compute terms come from the fits' forward + backward times t_i for F_i FLOPs of real tokens at
// width C_i: t_i = F_i / R · (C_i + h) / C_i, i.e. t_i = F_i·x + (F_i/C_i)·y with x = 1/R and
// y = h/R, solved by least squares on relative error (R: flops_per_s, the rate of a wide model;
// h: half_rate_width). One fit gives R alone (h = 0). The first fit also gives the memory
// stream of what the step does per parameter (32 B/param over the step's time beyond forward,
// backward and waits: AdamW, gradient zeroing, clipping).
// PROBE.json: allreduce_probe's last line; a least-squares fit (relative error) of the ring's
// t = 2(p−1)/p·n·β + 2(p−1)·α gives the link. RUN.json: train_throughput runs (any shape, 1 or
// more ranks) whose step time is predicted from those terms alone and compared with the
// measured one. Prints a table, the calibrated cluster object and one JSON line.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/step_model.h"

namespace {

using nlohmann::json;

// The built-in sim:reach sample: 72 context tokens on average plus the 16-action chunk
// (train_throughput's default horizon); planner/plan_request.h holds the same figure.
constexpr double kTokensPerSample = 72.0 + 16.0;

json Load(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

planner::ModelShape ShapeOf(const json& run) {
  planner::ModelShape m;
  m.d_model = run["d_model"];
  m.layers = run["layers"];
  m.heads = run["heads"];
  m.mlp = run["mlp"];
  return m;
}

planner::Workload WorkloadOf(const json& run) {
  planner::Workload w;
  w.model = ShapeOf(run);
  w.tokens_per_sample = kTokensPerSample;
  w.segment_tokens = kTokensPerSample;
  w.samples_per_rank = run["packed"]["samples_per_rank"].get<double>();
  return w;
}

double FwdBwdSeconds(const json& run) {
  return run["packed"]["forward_seconds"].get<double>() +
         run["packed"]["backward_seconds"].get<double>();
}

// The compute law's two terms from the fit runs (see the top of the file).
void FitCompute(const std::vector<json>& fits, planner::ComputeModel* c) {
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0, sx = 0;
  for (const json& run : fits) {
    const planner::Workload w = WorkloadOf(run);
    const double flops = w.samples_per_rank * w.tokens_per_sample *
                         planner::FlopsPerToken(w.model, w.segment_tokens);
    const double t = FwdBwdSeconds(run);
    // Divided by t: each equation's residual is a relative error.
    const double a = flops / t, b = flops / w.model.d_model / t;
    s00 += a * a, s01 += a * b, s11 += b * b, r0 += a, r1 += b;
    sx += a;
  }
  const double det = s00 * s11 - s01 * s01;
  double x = 0, y = 0;
  if (fits.size() >= 2 && det > 1e-12 * s00 * s11) {
    x = (r0 * s11 - r1 * s01) / det;
    y = (s00 * r1 - s01 * r0) / det;
  }
  if (x <= 0 || y < 0) {  // one shape, or narrow ones no slower: one rate for every width
    x = sx / s00;
    y = 0;
  }
  c->flops_per_s = 1.0 / x;
  c->half_rate_width = y / x;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1) {
    out.push_back(s.substr(start, comma - start));
  }
  out.push_back(s.substr(start));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: planner_calibrate FIT.json[,FIT.json...] PROBE.json RUN.json...\n");
    return 2;
  }
  std::vector<json> fits;
  for (const std::string& path : SplitCommas(argv[1])) fits.push_back(Load(path));
  const json probe = Load(argv[2]);
  const json& fit = fits.front();
  const json& fp = fit["packed"];
  const planner::Workload fw = WorkloadOf(fit);
  const double params = static_cast<double>(planner::ParamCount(fw.model));
  const double fwd_bwd = FwdBwdSeconds(fit);

  planner::Cluster c;
  c.name = "this-machine";
  c.ranks_per_node = 2;
  FitCompute(fits, &c.compute);
  // Everything of the step beyond forward, backward and the waits (AdamW, zeroing the
  // gradients, clipping their norm) streams the parameters: measured at the shapes here it is
  // 7–9 ns per parameter from 0.35 M to 5.8 M parameters, not a fixed time. So it is charged as
  // the optimizer's memory stream, 32 B per parameter, and nothing is left fixed.
  const double waits = fp["allreduce_wait_seconds"].get<double>() +
                       fp["data_wait_seconds"].get<double>();
  const double per_param_s = fp["step_seconds"].get<double>() - fwd_bwd - waits;
  c.compute.memory_bytes_per_s =
      32.0 * params / std::max(per_param_s, fp["optimizer_seconds"].get<double>());
  c.step_overhead_s = 0.0;

  // t = a + b·n, weighted by 1/t² so small and large messages count alike.
  const int p = probe["ranks"];
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
  for (size_t i = 0; i < probe["bytes"].size(); ++i) {
    const double n = probe["bytes"][i], t = probe["seconds"][i], w = 1.0 / (t * t);
    s00 += w, s01 += w * n, s11 += w * n * n, r0 += w * t, r1 += w * n * t;
  }
  const double det = s00 * s11 - s01 * s01;
  const double a = std::max(0.0, (r0 * s11 - r1 * s01) / det), b = (s00 * r1 - s01 * r0) / det;
  c.intra.latency_s = a / (2.0 * (p - 1));
  c.intra.bytes_per_s = 2.0 * (p - 1) / p / b;
  c.inter = c.intra;
  c.algorithm = planner::AllreduceAlgorithm::kRing;

  std::printf("fit (1 rank, %zu shape(s), reference d_model %d, %d layers, mlp %d): %.2f GFLOP/s "
              "per rank at width -> inf, half that at width %.0f (%.2f GFLOP/s at the reference), "
              "per-parameter work %.2f GB/s, %.2f ms fixed per step; all-reduce (%d ranks) alpha %.1f us, "
              "%.2f GB/s\n",
              fits.size(), fw.model.d_model, fw.model.layers, fw.model.mlp,
              c.compute.flops_per_s / 1e9, c.compute.half_rate_width,
              planner::RateAtWidth(c.compute, fw.model.d_model) / 1e9,
              c.compute.memory_bytes_per_s / 1e9, c.step_overhead_s * 1e3, p,
              c.intra.latency_s * 1e6, c.intra.bytes_per_s / 1e9);
  std::printf("%-28s %5s %11s %11s %8s  %s\n", "run", "ranks", "measured_ms", "predicted_ms",
              "error", "(fwd+bwd, all-reduce wait: measured / predicted ms)");
  json checks = json::array();
  double worst = 0.0;
  for (int i = 3; i < argc; ++i) {
    const json run = Load(argv[i]);
    const planner::Workload w = WorkloadOf(run);
    const int ranks = run["world_size"];
    const planner::StepPrediction pred = planner::PredictStep(w, c, {}, ranks);
    const json& m = run["packed"];
    const double measured = m["step_seconds"], error = (pred.step_s - measured) / measured;
    worst = std::max(worst, std::fabs(error));
    char name[64];
    std::snprintf(name, sizeof name, "d%d L%d mlp%d rows%d", w.model.d_model, w.model.layers,
                  w.model.mlp, run["rows"].get<int>());
    std::printf("%-28s %5d %11.1f %11.1f %+7.1f%%  (%.1f / %.1f, %.1f / %.1f)\n", name, ranks,
                measured * 1e3, pred.step_s * 1e3, 100 * error,
                (m["forward_seconds"].get<double>() + m["backward_seconds"].get<double>()) * 1e3,
                (pred.forward_s + pred.backward_s) * 1e3,
                m["allreduce_wait_seconds"].get<double>() * 1e3, pred.exposed_comm_s * 1e3);
    checks.push_back({{"run", name}, {"ranks", ranks}, {"measured_step_seconds", measured},
                      {"predicted_step_seconds", pred.step_s}, {"error", error}});
  }
  const json cluster = {
      {"name", c.name},
      {"ranks_per_node", c.ranks_per_node},
      {"compute", {{"flops_per_s", c.compute.flops_per_s},
                   {"half_rate_width", c.compute.half_rate_width},
                   {"memory_gbps", c.compute.memory_bytes_per_s / 1e9}}},
      {"intra", {{"gbps", c.intra.bytes_per_s / 1e9}, {"latency_us", c.intra.latency_s * 1e6}}},
      {"inter", {{"gbps", c.inter.bytes_per_s / 1e9}, {"latency_us", c.inter.latency_s * 1e6}}},
      {"allreduce", "ring"},
      {"step_overhead_ms", c.step_overhead_s * 1e3}};
  std::printf("cluster: %s\n", cluster.dump().c_str());
  std::printf("worst error %.1f%% (goal: within 15%%)\n", 100 * worst);
  std::printf("%s\n", json({{"bench", "planner_calibrate"}, {"cluster", cluster},
                            {"checks", checks}, {"worst_abs_error", worst}})
                          .dump()
                          .c_str());
  return 0;
}
