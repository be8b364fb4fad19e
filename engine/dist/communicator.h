// Communicator: the collective operations the trainer needs for data parallelism, behind one
// small interface so the trainer runs (and is tested) in one process without MPI.
//
// Every rank must call the collectives in the same order with the same sizes; that holds for the
// nonblocking ones too (they are matched by the order in which they are started, not finished),
// kind by kind: all-reduces, all-to-alls and all-gathers are each matched only among their own
// kind, so one kind may be started at different points relative to another on different ranks.
// Implementations: LocalCommunicator (world size 1, no-ops) here, MpiCommunicator in
// engine/dist/mpi_communicator.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace engine {

// Handle of a nonblocking collective in flight. Valid from Start* until Test returns true or
// Wait returns; after that the id may be reused.
using CollectiveId = int;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // data (n) := (sum over ranks of data) / world_size, in place. Every rank gets bitwise the same
  // result, which is what keeps replicated parameters identical.
  virtual void AllreduceMean(float* data, size_t n) = 0;
  // Sum of x over ranks, on every rank.
  virtual double AllreduceSum(double x) = 0;
  // Max of x over ranks, on every rank.
  virtual double AllreduceMax(double x) = 0;

  // Nonblocking in-place sum over ranks of data (n). The buffer must not be read or written until
  // the collective completes. Every rank receives bitwise the same sums. n < 2^31.
  virtual CollectiveId StartAllreduceSum(float* data, size_t n) = 0;
  virtual CollectiveId StartAllreduceSum(double* data, size_t n) = 0;
  // Nonblocking byte exchanges of bytes_per_rank bytes per rank (the fp8 gradient all-reduce,
  // engine/dist/fp8_allreduce.h). Alltoall: block j of send (j · bytes_per_rank) goes to rank j,
  // and block r of recv comes from rank r. Allgather: send (one block) goes to every rank, block r
  // of recv comes from rank r. Neither buffer may be touched until the collective completes.
  // bytes_per_rank < 2^31.
  virtual CollectiveId StartAlltoallBytes(const uint8_t* send, uint8_t* recv,
                                          size_t bytes_per_rank) = 0;
  virtual CollectiveId StartAllgatherBytes(const uint8_t* send, uint8_t* recv,
                                           size_t bytes_per_rank) = 0;
  // Drives communication progress; true once `id` has completed (the id is then released).
  virtual bool Test(CollectiveId id) = 0;
  // Blocks until `id` completes, then releases it.
  virtual void Wait(CollectiveId id) = 0;

  // Replaces *bytes on every rank with root's *bytes (any length).
  virtual void BroadcastBytes(std::string* bytes, int root) = 0;
  // Blocking: root's *all becomes every rank's n floats, rank by rank (world_size · n); other
  // ranks' *all is left empty.
  virtual void GatherFloats(const float* mine, size_t n, std::vector<float>* all, int root) = 0;

  // A communicator of the ranks that passed the same `color`, ranked in their order here.
  // Collective: every rank of this one calls it, in the same order as its other collectives.
  virtual std::unique_ptr<Communicator> Split(int color) = 0;

  // Point-to-point messages (the disaggregated RL roles, engine/rl/rollout_ranks.h). Messages
  // from one rank to another with the same tag arrive in the order they were sent.
  // Starts sending `bytes` to rank `dest`; the communicator keeps the buffer until the send
  // completes, which later calls (any of these three) drive. bytes.size() < 2^31.
  virtual void SendBytes(int dest, int tag, std::string bytes) = 0;
  // Receives a message with `tag` from any rank if one has arrived: true, with *bytes and
  // *source filled. Never blocks.
  virtual bool TryReceiveBytes(int tag, std::string* bytes, int* source) = 0;
  // Blocks until every message this rank sent has been delivered.
  virtual void FlushSends() = 0;
};

// A world of one: collectives return their input and complete at once.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void AllreduceMean(float*, size_t) override {}
  double AllreduceSum(double x) override { return x; }
  double AllreduceMax(double x) override { return x; }
  CollectiveId StartAllreduceSum(float*, size_t) override { return 0; }
  CollectiveId StartAllreduceSum(double*, size_t) override { return 0; }
  CollectiveId StartAlltoallBytes(const uint8_t* send, uint8_t* recv, size_t bytes) override {
    if (send != recv && bytes > 0) std::memcpy(recv, send, bytes);
    return 0;
  }
  CollectiveId StartAllgatherBytes(const uint8_t* send, uint8_t* recv, size_t bytes) override {
    return StartAlltoallBytes(send, recv, bytes);
  }
  bool Test(CollectiveId) override { return true; }
  void Wait(CollectiveId) override {}
  void BroadcastBytes(std::string*, int) override {}
  void GatherFloats(const float* mine, size_t n, std::vector<float>* all, int) override {
    all->assign(mine, mine + n);
  }
  std::unique_ptr<Communicator> Split(int) override {
    return std::make_unique<LocalCommunicator>();
  }
  // Messages to itself (the only rank there is).
  void SendBytes(int, int tag, std::string bytes) override {
    inbox_[tag].push_back(std::move(bytes));
  }
  bool TryReceiveBytes(int tag, std::string* bytes, int* source) override {
    auto it = inbox_.find(tag);
    if (it == inbox_.end() || it->second.empty()) return false;
    *bytes = std::move(it->second.front());
    it->second.pop_front();
    *source = 0;
    return true;
  }
  void FlushSends() override {}

 private:
  std::map<int, std::deque<std::string>> inbox_;
};

}  // namespace engine
