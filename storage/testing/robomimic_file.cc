#include "storage/testing/robomimic_file.h"

#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/hash.h"

namespace storage::testing {

namespace {

using common::SplitMix64;

hid_t FileType(Hdf5Writer::Type t) {
  switch (t) {
    case Hdf5Writer::Type::kU8:
      return H5T_STD_U8LE;
    case Hdf5Writer::Type::kI32:
      return H5T_STD_I32LE;
    case Hdf5Writer::Type::kI64:
      return H5T_STD_I64LE;
    case Hdf5Writer::Type::kF32:
      return H5T_IEEE_F32LE;
    case Hdf5Writer::Type::kF64:
      return H5T_IEEE_F64LE;
  }
  return -1;
}

hid_t MemType(Hdf5Writer::Type t) {
  switch (t) {
    case Hdf5Writer::Type::kU8:
      return H5T_NATIVE_UINT8;
    case Hdf5Writer::Type::kI32:
      return H5T_NATIVE_INT32;
    case Hdf5Writer::Type::kI64:
      return H5T_NATIVE_INT64;
    case Hdf5Writer::Type::kF32:
      return H5T_NATIVE_FLOAT;
    case Hdf5Writer::Type::kF64:
      return H5T_NATIVE_DOUBLE;
  }
  return -1;
}

H5Handle IntermediateGroups() {
  H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return lcpl;
}

}  // namespace

common::Result<Hdf5Writer> Hdf5Writer::Create(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Hdf5Writer w;
  w.file_ = H5Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!w.file_.valid()) return common::Internal("cannot create " + path);
  return w;
}

common::Result<Hdf5Writer> Hdf5Writer::OpenForEdit(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Hdf5Writer w;
  w.file_ = H5Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!w.file_.valid()) return common::Internal("cannot open " + path);
  return w;
}

common::Status Hdf5Writer::WriteDataset(const std::string& path, Type type,
                                        const std::vector<int64_t>& dims, const void* data,
                                        int gzip) {
  std::vector<hsize_t> hd(dims.begin(), dims.end());
  H5Handle space(H5Screate_simple(static_cast<int>(hd.size()), hd.data(), nullptr));
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  bool empty = std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d == 0; });
  if (gzip > 0 && !hd.empty() && !empty) {
    std::vector<hsize_t> chunk = hd;
    chunk[0] = std::min<hsize_t>(hd[0], 16);
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip));
  }
  H5Handle lcpl = IntermediateGroups();
  H5Handle ds(H5Dcreate2(file_.get(), path.c_str(), FileType(type), space.get(), lcpl.get(),
                         dcpl.get(), H5P_DEFAULT));
  if (!ds.valid()) return common::Internal("cannot create dataset " + path);
  if (!empty && H5Dwrite(ds.get(), MemType(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    return common::Internal("cannot write dataset " + path);
  }
  return common::Status::Ok();
}

common::Status Hdf5Writer::CreateGroup(const std::string& path) {
  H5Handle lcpl = IntermediateGroups();
  H5Handle g(H5Gcreate2(file_.get(), path.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!g.valid()) return common::Internal("cannot create group " + path);
  return common::Status::Ok();
}

common::Status Hdf5Writer::WriteStringAttribute(const std::string& object, const std::string& name,
                                                const std::string& value) {
  // Variable-length UTF-8, as h5py stores a Python str attribute.
  H5Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  H5Handle space(H5Screate(H5S_SCALAR));
  if (H5Aexists_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0) {
    H5Adelete_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT);
  }
  H5Handle attr(H5Acreate_by_name(file_.get(), object.c_str(), name.c_str(), type.get(),
                                  space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  const char* p = value.c_str();
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), &p) < 0) {
    return common::Internal("cannot write attribute " + name + " of " + object);
  }
  return common::Status::Ok();
}

common::Status Hdf5Writer::WriteIntAttribute(const std::string& object, const std::string& name,
                                             int64_t value) {
  H5Handle space(H5Screate(H5S_SCALAR));
  if (H5Aexists_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0) {
    H5Adelete_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT);
  }
  H5Handle attr(H5Acreate_by_name(file_.get(), object.c_str(), name.c_str(), H5T_STD_I64LE,
                                  space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid() || H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) < 0) {
    return common::Internal("cannot write attribute " + name + " of " + object);
  }
  return common::Status::Ok();
}

common::Status Hdf5Writer::WriteStringList(const std::string& path,
                                           const std::vector<std::string>& values) {
  size_t width = 1;
  for (const auto& v : values) width = std::max(width, v.size());
  std::vector<char> buf(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i)
    std::memcpy(&buf[i * width], values[i].data(), values[i].size());
  H5Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), width);
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  hsize_t n = values.size();
  H5Handle space(H5Screate_simple(1, &n, nullptr));
  H5Handle lcpl = IntermediateGroups();
  H5Handle ds(H5Dcreate2(file_.get(), path.c_str(), type.get(), space.get(), lcpl.get(),
                         H5P_DEFAULT, H5P_DEFAULT));
  if (!ds.valid() ||
      (n > 0 && H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)) {
    return common::Internal("cannot write string list " + path);
  }
  return common::Status::Ok();
}

common::Status Hdf5Writer::Delete(const std::string& path) {
  if (H5Ldelete(file_.get(), path.c_str(), H5P_DEFAULT) < 0) {
    return common::Internal("cannot delete " + path);
  }
  return common::Status::Ok();
}

common::Result<std::vector<Episode>> WriteRobomimicFile(const std::string& path,
                                                        const RobomimicFileSpec& spec) {
  using Type = Hdf5Writer::Type;
  EMBODY_ASSIGN_OR_RETURN(w, Hdf5Writer::Create(path));
  EMBODY_RETURN_IF_ERROR(w.CreateGroup("data"));
  EMBODY_RETURN_IF_ERROR(w.WriteStringAttribute("data", "env_args", spec.env_args));
  std::string language;
  if (!spec.problem_info.empty()) {
    EMBODY_RETURN_IF_ERROR(w.WriteStringAttribute("data", "problem_info", spec.problem_info));
    auto j = nlohmann::json::parse(spec.problem_info, nullptr, false);
    if (j.is_object() && j.contains("language_instruction")) language = j["language_instruction"];
  }
  std::vector<std::string> names = spec.demo_names;
  if (names.empty()) {
    for (int d = 0; d < spec.demos; ++d) names.push_back("demo_" + std::to_string(d));
  }
  std::vector<std::pair<uint64_t, Episode>> out;  // (demo number, episode)
  int64_t total = 0;
  for (size_t d = 0; d < names.size(); ++d) {
    const std::string g = "data/" + names[d];
    const int64_t T = d < spec.frames_per_demo.size() ? spec.frames_per_demo[d] : spec.frames;
    const uint64_t salt = SplitMix64(spec.seed * 1000003 + d);
    Episode ep;
    auto add = [&](const std::string& key, Type type, std::vector<int64_t> dims, DType dtype,
                   const void* data, size_t bytes) -> common::Status {
      EMBODY_RETURN_IF_ERROR(w.WriteDataset(g + "/" + key, type, dims, data, spec.gzip));
      Array a;
      a.spec.name = key;
      a.spec.dtype = dtype;
      a.spec.frame_shape.assign(dims.begin() + 1, dims.end());
      a.frames = dims[0];
      a.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
      ep.arrays.push_back(std::move(a));
      return common::Status::Ok();
    };
    auto floats = [&](int64_t n, uint64_t k) {
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        v[i] = static_cast<double>(SplitMix64(salt ^ (k << 40) ^ static_cast<uint64_t>(i)) >> 11) *
                   0x1.0p-53 * 2 -
               1;
      }
      return v;
    };
    // actions
    std::vector<double> actions = floats(T * spec.action_dim, 1);
    if (spec.f32_actions) {
      std::vector<float> f(actions.begin(), actions.end());
      EMBODY_RETURN_IF_ERROR(
          add("actions", Type::kF32, {T, spec.action_dim}, DType::kF32, f.data(), f.size() * 4));
    } else {
      EMBODY_RETURN_IF_ERROR(add("actions", Type::kF64, {T, spec.action_dim}, DType::kF64,
                                 actions.data(), actions.size() * 8));
    }
    // dones: int64 in robomimic, imported as i32
    std::vector<int64_t> dones(static_cast<size_t>(T), 0);
    if (T > 0) dones.back() = 1;
    std::vector<int32_t> dones32(dones.begin(), dones.end());
    EMBODY_RETURN_IF_ERROR(w.WriteDataset(g + "/dones", Type::kI64, {T}, dones.data(), spec.gzip));
    {
      Array a;
      a.spec = {"dones", DType::kI32, {}};
      a.frames = T;
      a.data.assign(reinterpret_cast<uint8_t*>(dones32.data()),
                    reinterpret_cast<uint8_t*>(dones32.data()) + dones32.size() * 4);
      ep.arrays.push_back(std::move(a));
    }
    const char* cams[] = {"obs/agentview_image", "obs/robot0_eye_in_hand_image"};
    const int64_t S = spec.image_size;
    std::vector<std::pair<std::string, std::vector<double>>> low_dim = {
        {"obs/robot0_eef_pos", floats(T * 3, 2)}, {"obs/robot0_gripper_qpos", floats(T * 2, 3)}};
    for (int c = 0; c < std::min(spec.cameras, 2); ++c) {
      std::vector<uint8_t> img(static_cast<size_t>(T * S * S * 3));
      uint64_t x = salt ^ (uint64_t{10 + static_cast<uint64_t>(c)} << 40);
      for (size_t i = 0; i < img.size(); i += 8) {
        uint64_t r = SplitMix64(x + i);
        std::memcpy(&img[i], &r, std::min<size_t>(8, img.size() - i));
      }
      EMBODY_RETURN_IF_ERROR(
          add(cams[c], Type::kU8, {T, S, S, 3}, DType::kU8, img.data(), img.size()));
    }
    EMBODY_RETURN_IF_ERROR(add("obs/robot0_eef_pos", Type::kF64, {T, 3}, DType::kF64,
                               low_dim[0].second.data(), low_dim[0].second.size() * 8));
    EMBODY_RETURN_IF_ERROR(add("obs/robot0_gripper_qpos", Type::kF64, {T, 2}, DType::kF64,
                               low_dim[1].second.data(), low_dim[1].second.size() * 8));
    // next_obs repeats obs one frame later; the importer leaves it out.
    EMBODY_RETURN_IF_ERROR(w.WriteDataset(g + "/next_obs/robot0_eef_pos", Type::kF64, {T, 3},
                                          low_dim[0].second.data()));
    std::vector<double> rewards(static_cast<size_t>(T), 0.0);
    if (T > 0) rewards.back() = 1.0;
    EMBODY_RETURN_IF_ERROR(
        add("rewards", Type::kF64, {T}, DType::kF64, rewards.data(), rewards.size() * 8));
    EMBODY_RETURN_IF_ERROR(w.WriteIntAttribute(g, "num_samples", T));
    std::sort(ep.arrays.begin(), ep.arrays.end(),
              [](const Array& a, const Array& b) { return a.spec.name < b.spec.name; });
    ep.attributes.emplace_back(kAttrDemoName, names[d]);
    ep.attributes.emplace_back(kAttrSourceFile, path);
    if (!language.empty()) ep.attributes.emplace_back(kAttrLanguage, language);
    total += T;
    uint64_t number = names[d].rfind("demo_", 0) == 0 ? std::stoull(names[d].substr(5)) : d;
    out.emplace_back(number, std::move(ep));
  }
  EMBODY_RETURN_IF_ERROR(w.WriteIntAttribute("data", "total", total));
  for (const auto& [name, demos] : spec.masks) {
    EMBODY_RETURN_IF_ERROR(w.WriteStringList("mask/" + name, demos));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Episode> episodes;
  for (auto& [n, ep] : out) episodes.push_back(std::move(ep));
  return episodes;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* dir = ::mkdtemp(buf.data());
  return dir ? std::string(dir) : std::string();
}

}  // namespace storage::testing
