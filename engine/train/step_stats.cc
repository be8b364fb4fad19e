#include "engine/train/step_stats.h"

#include <cstdio>

#include "engine/policy/ptq.h"

namespace engine {
namespace {

template <typename T>
common::Status Read(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) {
    return common::InvalidArgument(std::string("step event without a number \"") + key + "\"", key);
  }
  *out = it->get<T>();
  return common::Status::Ok();
}

template <typename T>
common::Status ReadOptional(const nlohmann::json& j, const char* key, std::optional<T>* out) {
  out->reset();
  if (!j.contains(key)) return common::Status::Ok();
  T v{};
  EMBODY_RETURN_IF_ERROR(Read(j, key, &v));
  *out = v;
  return common::Status::Ok();
}

common::Status ReadFp8Stats(const nlohmann::json& event, const char* key,
                            std::optional<fp8::Fp8Stats>* out) {
  out->reset();
  auto it = event.find(key);
  if (it == event.end()) return common::Status::Ok();
  if (!it->is_object()) {
    return common::InvalidArgument(std::string(key) + " is not an object", key);
  }
  fp8::Fp8Stats f;
  EMBODY_RETURN_IF_ERROR(Read(*it, "elements", &f.elements));
  EMBODY_RETURN_IF_ERROR(Read(*it, "amax", &f.amax));
  EMBODY_RETURN_IF_ERROR(Read(*it, "scale_min", &f.scale_min));
  EMBODY_RETURN_IF_ERROR(Read(*it, "scale_max", &f.scale_max));
  EMBODY_RETURN_IF_ERROR(Read(*it, "saturated", &f.saturated));
  EMBODY_RETURN_IF_ERROR(Read(*it, "underflowed", &f.underflowed));
  EMBODY_RETURN_IF_ERROR(Read(*it, "nan", &f.nan));
  *out = f;
  return common::Status::Ok();
}

}  // namespace

nlohmann::json StepStats::ToJson() const {
  nlohmann::json j = {{"type", "step"},
                      {"step", step},
                      {"steps", steps},
                      {"loss", loss},
                      {"lr", lr},
                      {"grad_norm", grad_norm},
                      {"tokens_per_s", tokens_per_s},
                      {"samples_per_s", samples_per_s},
                      {"step_seconds", step_seconds},
                      {"data_wait_seconds", data_wait_seconds},
                      {"forward_seconds", forward_seconds},
                      {"backward_seconds", backward_seconds},
                      {"allreduce_seconds", allreduce_seconds},
                      {"optimizer_seconds", optimizer_seconds},
                      {"padding_ratio", padding_ratio},
                      {"packing_efficiency", packing_efficiency},
                      {"world_size", world_size}};
  if (grad_wire_bytes) j["grad_wire_bytes"] = *grad_wire_bytes;
  if (grad_wire_bytes_fp32) j["grad_wire_bytes_fp32"] = *grad_wire_bytes_fp32;
  if (fp8_allreduce) j["fp8_allreduce"] = Fp8StatsJson(*fp8_allreduce);
  if (fp8_compute_e4m3) j["fp8_compute_e4m3"] = Fp8StatsJson(*fp8_compute_e4m3);
  if (fp8_compute_e5m2) j["fp8_compute_e5m2"] = Fp8StatsJson(*fp8_compute_e5m2);
  if (mfu) j["mfu"] = *mfu;
  return j;
}

common::Result<StepStats> StepStats::FromJson(const nlohmann::json& event) {
  if (!event.is_object() || event.value("type", "") != "step") {
    return common::InvalidArgument("not a step event", "type");
  }
  StepStats s;
  EMBODY_RETURN_IF_ERROR(Read(event, "step", &s.step));
  EMBODY_RETURN_IF_ERROR(Read(event, "steps", &s.steps));
  EMBODY_RETURN_IF_ERROR(Read(event, "loss", &s.loss));
  EMBODY_RETURN_IF_ERROR(Read(event, "lr", &s.lr));
  EMBODY_RETURN_IF_ERROR(Read(event, "grad_norm", &s.grad_norm));
  EMBODY_RETURN_IF_ERROR(Read(event, "tokens_per_s", &s.tokens_per_s));
  EMBODY_RETURN_IF_ERROR(Read(event, "samples_per_s", &s.samples_per_s));
  EMBODY_RETURN_IF_ERROR(Read(event, "step_seconds", &s.step_seconds));
  EMBODY_RETURN_IF_ERROR(Read(event, "data_wait_seconds", &s.data_wait_seconds));
  EMBODY_RETURN_IF_ERROR(Read(event, "forward_seconds", &s.forward_seconds));
  EMBODY_RETURN_IF_ERROR(Read(event, "backward_seconds", &s.backward_seconds));
  EMBODY_RETURN_IF_ERROR(Read(event, "allreduce_seconds", &s.allreduce_seconds));
  EMBODY_RETURN_IF_ERROR(Read(event, "optimizer_seconds", &s.optimizer_seconds));
  EMBODY_RETURN_IF_ERROR(Read(event, "padding_ratio", &s.padding_ratio));
  EMBODY_RETURN_IF_ERROR(Read(event, "packing_efficiency", &s.packing_efficiency));
  EMBODY_RETURN_IF_ERROR(Read(event, "world_size", &s.world_size));
  EMBODY_RETURN_IF_ERROR(ReadOptional(event, "grad_wire_bytes", &s.grad_wire_bytes));
  EMBODY_RETURN_IF_ERROR(ReadOptional(event, "grad_wire_bytes_fp32", &s.grad_wire_bytes_fp32));
  EMBODY_RETURN_IF_ERROR(ReadOptional(event, "mfu", &s.mfu));
  EMBODY_RETURN_IF_ERROR(ReadFp8Stats(event, "fp8_allreduce", &s.fp8_allreduce));
  EMBODY_RETURN_IF_ERROR(ReadFp8Stats(event, "fp8_compute_e4m3", &s.fp8_compute_e4m3));
  EMBODY_RETURN_IF_ERROR(ReadFp8Stats(event, "fp8_compute_e5m2", &s.fp8_compute_e5m2));
  return s;
}

std::string StepStats::ProgressLine() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "step %lld/%lld loss %.4f lr %.2e grad_norm %.3f step %.1f ms tokens/s %.4g "
                "samples/s %.3g padding %.1f%%",
                static_cast<long long>(step), static_cast<long long>(steps), loss, lr, grad_norm,
                step_seconds * 1e3, tokens_per_s, samples_per_s, 100.0 * padding_ratio);
  return line;
}

}  // namespace engine
