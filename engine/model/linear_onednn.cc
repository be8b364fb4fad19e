// oneDNN matmul behind the Linear layer (linear_onednn.h). Each thread keeps its own oneDNN
// engine, stream and a cache of the primitives it has built, keyed by product and shape: a
// training step runs the same few dozen shapes every step, and building a primitive costs far
// more than running a small one.
#include "engine/model/linear_onednn.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace engine::linear {
namespace {

using dnnl::memory;
using Dims = memory::dims;

enum class Product { kForward, kBackwardIn, kBackwardW };

struct Key {
  Product product;
  OnednnType type;
  int B, C, OC;
  bool bias, accumulate;
  bool operator<(const Key& o) const {
    return std::tie(product, type, B, C, OC, bias, accumulate) <
           std::tie(o.product, o.type, o.B, o.C, o.OC, o.bias, o.accumulate);
  }
};

struct Matmul {
  dnnl::matmul prim;
  memory::desc src, weights, bias, dst;
};

class ThreadState {
 public:
  ThreadState() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    // oneDNN's OpenMP runtime would otherwise start a team of every core on each call, and the
    // engine runs one single-threaded rank per core. The setting is this thread's own.
    omp_set_num_threads(1);
  }

  const Matmul& Get(const Key& k) {
    auto it = matmuls_.find(k);
    if (it != matmuls_.end()) return it->second;
    return matmuls_.emplace(k, Build(k)).first->second;
  }

  // The float32 `src` (n values) rounded to bfloat16 into scratch buffer `slot` (0..2).
  const uint16_t* ToBf16(int slot, const float* src, long n) {
    std::vector<uint16_t>& buf = bf16_[slot];
    if (static_cast<long>(buf.size()) < n) buf.resize(n);
    auto it = reorders_.find(n);
    if (it == reorders_.end()) {
      const memory::desc f({n}, memory::data_type::f32, memory::format_tag::a);
      const memory::desc h({n}, memory::data_type::bf16, memory::format_tag::a);
      it = reorders_.emplace(n, dnnl::reorder(dnnl::reorder::primitive_desc(engine_, f, engine_, h)))
               .first;
    }
    memory from({{n}, memory::data_type::f32, memory::format_tag::a}, engine_,
                const_cast<float*>(src));
    memory to({{n}, memory::data_type::bf16, memory::format_tag::a}, engine_, buf.data());
    it->second.execute(stream_, from, to);
    return buf.data();
  }

  void Run(const Matmul& m, const void* src, const void* weights, const float* bias, float* dst) {
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(m.src, engine_, const_cast<void*>(src))},
        {DNNL_ARG_WEIGHTS, memory(m.weights, engine_, const_cast<void*>(weights))},
        {DNNL_ARG_DST, memory(m.dst, engine_, dst)}};
    if (bias != nullptr) {
      args.emplace(DNNL_ARG_BIAS, memory(m.bias, engine_, const_cast<float*>(bias)));
    }
    m.prim.execute(stream_, args);
    stream_.wait();
  }

 private:
  Matmul Build(const Key& k) {
    const auto in = k.type == OnednnType::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const auto f32 = memory::data_type::f32;
    const long B = k.B, C = k.C, OC = k.OC;
    Matmul m;
    switch (k.product) {
      case Product::kForward:  // (B, C) · (C, OC), the weight (OC, C) read transposed
        m.src = memory::desc({B, C}, in, Dims{C, 1});
        m.weights = memory::desc({C, OC}, in, Dims{1, C});
        m.dst = memory::desc({B, OC}, f32, Dims{OC, 1});
        if (k.bias) m.bias = memory::desc({1, OC}, f32, Dims{OC, 1});
        break;
      case Product::kBackwardIn:  // (B, OC) · (OC, C)
        m.src = memory::desc({B, OC}, in, Dims{OC, 1});
        m.weights = memory::desc({OC, C}, in, Dims{C, 1});
        m.dst = memory::desc({B, C}, f32, Dims{C, 1});
        break;
      case Product::kBackwardW:  // (OC, B) · (B, C), dout (B, OC) read transposed
        m.src = memory::desc({OC, B}, in, Dims{1, OC});
        m.weights = memory::desc({B, C}, in, Dims{C, 1});
        m.dst = memory::desc({OC, C}, f32, Dims{C, 1});
        break;
    }
    dnnl::primitive_attr attr;
    if (k.accumulate) {  // dst += product: the gradient accumulates, as in the Eigen path
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::desc d = k.bias ? dnnl::matmul::desc(m.src, m.weights, m.bias, m.dst)
                                        : dnnl::matmul::desc(m.src, m.weights, m.dst);
    m.prim = dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine_));
    return m;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<Key, Matmul> matmuls_;
  std::map<long, dnnl::reorder> reorders_;
  std::vector<uint16_t> bf16_[3];
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

// A oneDNN error here is a bug (shapes are checked by the model), not bad input.
[[noreturn]] void Die(const dnnl::error& e) {
  std::fprintf(stderr, "onednn linear: %s (status %d)\n", e.what(), static_cast<int>(e.status));
  std::abort();
}

// The operand as the product reads it: itself in float32, or its bfloat16 copy in `slot`.
const void* Operand(ThreadState& s, OnednnType type, int slot, const float* p, long n) {
  return type == OnednnType::kBf16 ? static_cast<const void*>(s.ToBf16(slot, p, n)) : p;
}

}  // namespace

bool OnednnHasNativeBf16() {
  static const bool native = [] {
    try {
      // ISAs are bit sets, each a superset of those it extends (avx512_core_amx of
      // avx512_core_bf16): any ISA that contains avx512_core_bf16's bits runs bf16 natively,
      // including ones newer than this list (avx2_vnni does not: it lacks AVX-512).
      const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
      const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
      return (isa & bf16) == bf16;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return native;
}

void OnednnForward(OnednnType type, float* out, const float* inp, const float* weight,
                   const float* bias, int B, int C, int OC) {
  if (B == 0) return;
  try {
    ThreadState& s = State();
    const Matmul& m = s.Get({Product::kForward, type, B, C, OC, bias != nullptr, false});
    s.Run(m, Operand(s, type, 0, inp, static_cast<long>(B) * C),
          Operand(s, type, 1, weight, static_cast<long>(OC) * C), bias, out);
  } catch (const dnnl::error& e) {
    Die(e);
  }
}

void OnednnBackward(OnednnType type, float* dinp, float* dweight, float* dbias, const float* dout,
                    const float* inp, const float* weight, int B, int C, int OC,
                    bool overwrite_dinp) {
  if (B == 0) return;
  try {
    ThreadState& s = State();
    // dout is an operand of both products: rounded once.
    const void* dy = Operand(s, type, 0, dout, static_cast<long>(B) * OC);
    if (dinp != nullptr) {
      const Matmul& m = s.Get({Product::kBackwardIn, type, B, C, OC, false, !overwrite_dinp});
      s.Run(m, dy, Operand(s, type, 1, weight, static_cast<long>(OC) * C), nullptr, dinp);
    }
    const Matmul& m = s.Get({Product::kBackwardW, type, B, C, OC, false, true});
    s.Run(m, dy, Operand(s, type, 2, inp, static_cast<long>(B) * C), nullptr, dweight);
  } catch (const dnnl::error& e) {
    Die(e);
  }
  if (dbias != nullptr) {
    for (int b = 0; b < B; ++b) {
      const float* row = dout + static_cast<long>(b) * OC;
      for (int o = 0; o < OC; ++o) dbias[o] += row[o];
    }
  }
}

double OnednnTimeGemm(OnednnType type, int m, int n, int k, int reps) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m) * k), w(static_cast<size_t>(n) * k),
      y(static_cast<size_t>(m) * n);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  for (int rep = 0; rep < std::max(1, reps); ++rep) {
    const auto t0 = Clock::now();
    OnednnForward(type, y.data(), x.data(), w.data(), nullptr, m, k, n);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace engine::linear
