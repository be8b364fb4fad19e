#include "storage/hdf5_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>

namespace storage {

void H5Handle::Reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      H5Idec_ref(id_);
      break;
  }
  id_ = -1;
}

common::Result<Hdf5File> Hdf5File::Open(const std::string& path) {
  // HDF5 prints its error stack to stderr by default; our errors say what went wrong instead.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  // Said first with the system's reason: HDF5 reports a missing or unreadable file only as
  // "not HDF5".
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string why = path + ": cannot read: " + std::strerror(err);
    if (err == EACCES) {
      why += " (an import job reads as an unprivileged user: make the file and its directories "
             "readable by others, or upload it with `embody datasets upload`)";
    }
    return common::Status(err == ENOENT ? common::Code::kNotFound : common::Code::kInvalidArgument,
                          why);
  }
  ::close(fd);
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return common::InvalidArgument(path + ": not an HDF5 file (or cannot be read)");
  }
  Hdf5File f;
  f.path_ = path;
  f.file_ = H5Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.file_.valid()) return common::InvalidArgument(path + ": cannot open as HDF5");
  return f;
}

bool Hdf5File::Exists(const std::string& object) const {
  // H5Lexists fails rather than answering "no" when an intermediate group is missing, so the
  // path is walked one component at a time.
  std::string prefix;
  std::stringstream ss(object);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    prefix += (prefix.empty() ? "" : "/") + part;
    if (H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return !prefix.empty();
}

namespace {
herr_t CollectName(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}
}  // namespace

common::Result<std::vector<Hdf5File::Member>> Hdf5File::List(const std::string& group) const {
  H5Handle g(H5Gopen2(file_.get(), group.c_str(), H5P_DEFAULT));
  if (!g.valid()) return common::NotFound(path_ + ": no group " + group);
  std::vector<std::string> names;
  if (H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, CollectName, &names) < 0) {
    return common::InvalidArgument(path_ + ": cannot list group " + group);
  }
  std::vector<Member> out;
  for (const std::string& n : names) {
    H5Handle obj(H5Oopen(g.get(), n.c_str(), H5P_DEFAULT));
    Kind kind = Kind::kOther;
    if (obj.valid()) {
      H5I_type_t t = H5Iget_type(obj.get());
      kind = t == H5I_GROUP ? Kind::kGroup : t == H5I_DATASET ? Kind::kDataset : Kind::kOther;
    }
    out.push_back({n, kind});
  }
  return out;
}

common::Result<std::vector<int64_t>> Hdf5File::Dims(const std::string& dataset) const {
  H5Handle ds(H5Dopen2(file_.get(), dataset.c_str(), H5P_DEFAULT));
  if (!ds.valid()) return common::NotFound(path_ + ": no dataset " + dataset);
  H5Handle space(H5Dget_space(ds.get()));
  int nd = H5Sget_simple_extent_ndims(space.get());
  if (nd < 0 || nd > 32) return common::InvalidArgument(path_ + ": " + dataset + ": bad dataspace");
  std::vector<hsize_t> dims(static_cast<size_t>(nd));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::vector<int64_t> out;
  for (hsize_t d : dims) {
    if (d > (1ull << 40))
      return common::InvalidArgument(path_ + ": " + dataset + ": dimension too large");
    out.push_back(static_cast<int64_t>(d));
  }
  return out;
}

common::Result<Array> Hdf5File::ReadArray(const std::string& dataset,
                                          const std::string& key) const {
  std::string where = path_ + ": " + dataset;
  EMBODY_ASSIGN_OR_RETURN(dims, Dims(dataset));
  if (dims.empty()) return common::InvalidArgument(where + " is a scalar, not one value per frame");
  H5Handle ds(H5Dopen2(file_.get(), dataset.c_str(), H5P_DEFAULT));
  H5Handle type(H5Dget_type(ds.get()));
  H5T_class_t cls = H5Tget_class(type.get());
  size_t size = H5Tget_size(type.get());

  Array a;
  a.spec.name = key;
  a.frames = dims[0];
  a.spec.frame_shape.assign(dims.begin() + 1, dims.end());
  uint64_t elements = 1;
  for (int64_t d : dims) {
    elements *= static_cast<uint64_t>(d);
    if (elements > (1ull << 36)) return common::InvalidArgument(where + ": too large to import");
  }
  auto read = [&](hid_t mem_type, void* buf) -> common::Status {
    if (H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
      return common::InvalidArgument(where + ": read failed (damaged or unsupported data)");
    }
    return common::Status::Ok();
  };
  if ((cls == H5T_INTEGER && size == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE) ||
      (cls == H5T_ENUM && size == 1)) {
    a.spec.dtype = DType::kU8;
    a.data.resize(elements);
    if (cls == H5T_ENUM) {
      // h5py's bool is an enum over int8 {FALSE=0, TRUE=1}: its bytes are the values.
      H5Handle native(H5Tget_native_type(type.get(), H5T_DIR_ASCEND));
      EMBODY_RETURN_IF_ERROR(read(native.get(), a.data.data()));
    } else {
      EMBODY_RETURN_IF_ERROR(read(H5T_NATIVE_UINT8, a.data.data()));
    }
  } else if (cls == H5T_INTEGER) {
    // Read wide, then narrow with a check: HDF5's own conversion would clip silently.
    a.spec.dtype = DType::kI32;
    std::vector<int64_t> wide(elements);
    EMBODY_RETURN_IF_ERROR(read(H5T_NATIVE_INT64, wide.data()));
    a.data.resize(elements * 4);
    auto* out = reinterpret_cast<int32_t*>(a.data.data());
    for (uint64_t i = 0; i < elements; ++i) {
      if (wide[i] < std::numeric_limits<int32_t>::min() ||
          wide[i] > std::numeric_limits<int32_t>::max()) {
        return common::InvalidArgument(where + ": integer value " + std::to_string(wide[i]) +
                                       " does not fit in i32");
      }
      out[i] = static_cast<int32_t>(wide[i]);
    }
  } else if (cls == H5T_FLOAT && size == 8) {
    a.spec.dtype = DType::kF64;
    a.data.resize(elements * 8);
    EMBODY_RETURN_IF_ERROR(read(H5T_NATIVE_DOUBLE, a.data.data()));
  } else if (cls == H5T_FLOAT) {
    a.spec.dtype = DType::kF32;  // f32, and f16 widened by HDF5
    a.data.resize(elements * 4);
    EMBODY_RETURN_IF_ERROR(read(H5T_NATIVE_FLOAT, a.data.data()));
  } else {
    return common::InvalidArgument(where + ": unsupported element type (HDF5 class " +
                                   std::to_string(static_cast<int>(cls)) + ", " +
                                   std::to_string(size) + " bytes)");
  }
  return a;
}

bool Hdf5File::HasAttribute(const std::string& object, const std::string& name) const {
  return H5Aexists_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

common::Result<std::string> Hdf5File::ReadStringAttribute(const std::string& object,
                                                          const std::string& name) const {
  std::string where = path_ + ": attribute " + name + " of " + object;
  H5Handle attr(
      H5Aopen_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid()) return common::NotFound(where + " not found");
  H5Handle type(H5Aget_type(attr.get()));
  H5Handle space(H5Aget_space(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_npoints(space.get()) != 1) {
    return common::InvalidArgument(where + " is not a single string");
  }
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Handle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* buf = nullptr;
    if (H5Aread(attr.get(), mem.get(), &buf) < 0)
      return common::InvalidArgument(where + ": read failed");
    std::string out = buf ? buf : "";
    H5free_memory(buf);
    return out;
  }
  size_t size = H5Tget_size(type.get());
  if (size > (64u << 20)) return common::InvalidArgument(where + " is too long");
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0) {
    return common::InvalidArgument(where + ": read failed");
  }
  out.resize(std::strlen(out.c_str()));  // fixed-length strings are NUL- or space-padded
  return out;
}

common::Result<int64_t> Hdf5File::ReadIntAttribute(const std::string& object,
                                                   const std::string& name) const {
  std::string where = path_ + ": attribute " + name + " of " + object;
  H5Handle attr(
      H5Aopen_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid()) return common::NotFound(where + " not found");
  H5Handle type(H5Aget_type(attr.get()));
  H5Handle space(H5Aget_space(attr.get()));
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(space.get()) != 1) {
    return common::InvalidArgument(where + " is not a single integer");
  }
  int64_t v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &v) < 0)
    return common::InvalidArgument(where + ": read failed");
  return v;
}

common::Result<std::vector<std::string>> Hdf5File::ReadStringList(
    const std::string& dataset) const {
  std::string where = path_ + ": " + dataset;
  H5Handle ds(H5Dopen2(file_.get(), dataset.c_str(), H5P_DEFAULT));
  if (!ds.valid()) return common::NotFound(where + " not found");
  H5Handle type(H5Dget_type(ds.get()));
  H5Handle space(H5Dget_space(ds.get()));
  if (H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_ndims(space.get()) > 1) {
    return common::InvalidArgument(where + " is not a list of strings");
  }
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0 || n > (1 << 24)) return common::InvalidArgument(where + ": bad length");
  std::vector<std::string> out;
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Handle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    if (H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0) {
      return common::InvalidArgument(where + ": read failed");
    }
    for (char* p : ptrs) out.push_back(p ? p : "");
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
    return out;
  }
  size_t size = H5Tget_size(type.get());
  if (size == 0 || size > 4096) return common::InvalidArgument(where + ": bad string size");
  std::vector<char> buf(static_cast<size_t>(n) * size);
  if (H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) {
    return common::InvalidArgument(where + ": read failed");
  }
  for (hssize_t i = 0; i < n; ++i) {
    const char* p = buf.data() + static_cast<size_t>(i) * size;
    out.emplace_back(p, strnlen(p, size));
  }
  return out;
}

}  // namespace storage
