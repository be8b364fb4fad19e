#include "engine/dist/mpi_communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <memory>

namespace engine {

namespace {

MPI_Comm DupWorld() {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return c;
}

}  // namespace

MpiCommunicator::MpiCommunicator() : MpiCommunicator(DupWorld()) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_size_);
  MPI_Comm_dup(comm_, &alltoall_comm_);
  MPI_Comm_dup(comm_, &allgather_comm_);
  MPI_Comm_dup(comm_, &p2p_comm_);
}

MpiCommunicator::~MpiCommunicator() {
  for (MPI_Request& r : requests_) {
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  CompleteSends(/*wait=*/true);
  MPI_Comm_free(&alltoall_comm_);
  MPI_Comm_free(&allgather_comm_);
  MPI_Comm_free(&p2p_comm_);
  MPI_Comm_free(&comm_);
}

std::unique_ptr<Communicator> MpiCommunicator::Split(int color) {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_split(comm_, color, rank_, &c);
  return std::unique_ptr<Communicator>(new MpiCommunicator(c));
}

void MpiCommunicator::CompleteSends(bool wait) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    if (wait) {
      MPI_Wait(&it->first, MPI_STATUS_IGNORE);
      done = 1;
    } else {
      MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
    }
    it = done != 0 ? sends_.erase(it) : std::next(it);
  }
}

void MpiCommunicator::SendBytes(int dest, int tag, std::string bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    std::fprintf(stderr, "MpiCommunicator: message of %zu bytes (max 2^31-1)\n", bytes.size());
    std::abort();
  }
  CompleteSends(/*wait=*/false);
  sends_.emplace_back(MPI_REQUEST_NULL, std::move(bytes));
  auto& [request, buffer] = sends_.back();
  MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, dest, tag, p2p_comm_,
            &request);
}

bool MpiCommunicator::TryReceiveBytes(int tag, std::string* bytes, int* source) {
  CompleteSends(/*wait=*/false);
  int arrived = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, tag, p2p_comm_, &arrived, &status);
  if (arrived == 0) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  bytes->resize(static_cast<size_t>(count));
  MPI_Recv(bytes->data(), count, MPI_BYTE, status.MPI_SOURCE, tag, p2p_comm_, MPI_STATUS_IGNORE);
  *source = status.MPI_SOURCE;
  return true;
}

void MpiCommunicator::FlushSends() { CompleteSends(/*wait=*/true); }

void MpiCommunicator::AllreduceMean(float* data, size_t n) {
  if (world_size_ == 1) return;
  // MPI counts are int: reduce very large buffers in pieces.
  constexpr size_t kMaxCount = size_t{1} << 30;
  for (size_t off = 0; off < n; off += kMaxCount) {
    int count = static_cast<int>(std::min(kMaxCount, n - off));
    MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, comm_);
  }
  const float inv = 1.0f / static_cast<float>(world_size_);
  for (size_t i = 0; i < n; ++i) data[i] *= inv;
}

double MpiCommunicator::AllreduceSum(double x) {
  double out = x;
  MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_SUM, comm_);
  return out;
}

double MpiCommunicator::AllreduceMax(double x) {
  double out = x;
  MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_MAX, comm_);
  return out;
}

MPI_Request* MpiCommunicator::FreeSlot(size_t n, const char* what) {
  if (n > static_cast<size_t>(std::numeric_limits<int>::max())) {
    std::fprintf(stderr, "MpiCommunicator: nonblocking %s of %zu elements (max 2^31-1)\n", what, n);
    std::abort();
  }
  auto free_slot = std::find(requests_.begin(), requests_.end(), MPI_REQUEST_NULL);
  if (free_slot == requests_.end()) free_slot = requests_.insert(requests_.end(), MPI_REQUEST_NULL);
  return &*free_slot;
}

CollectiveId MpiCommunicator::Start(void* data, size_t n, MPI_Datatype type) {
  MPI_Request* slot = FreeSlot(n, "all-reduce");
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), type, MPI_SUM, comm_, slot);
  return static_cast<CollectiveId>(slot - requests_.data());
}

CollectiveId MpiCommunicator::StartAlltoallBytes(const uint8_t* send, uint8_t* recv,
                                                 size_t bytes_per_rank) {
  MPI_Request* slot = FreeSlot(bytes_per_rank, "all-to-all");
  const int count = static_cast<int>(bytes_per_rank);
  MPI_Ialltoall(send, count, MPI_BYTE, recv, count, MPI_BYTE, alltoall_comm_, slot);
  return static_cast<CollectiveId>(slot - requests_.data());
}

CollectiveId MpiCommunicator::StartAllgatherBytes(const uint8_t* send, uint8_t* recv,
                                                  size_t bytes_per_rank) {
  MPI_Request* slot = FreeSlot(bytes_per_rank, "all-gather");
  const int count = static_cast<int>(bytes_per_rank);
  MPI_Iallgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, allgather_comm_, slot);
  return static_cast<CollectiveId>(slot - requests_.data());
}

CollectiveId MpiCommunicator::StartAllreduceSum(float* data, size_t n) {
  return Start(data, n, MPI_FLOAT);
}

CollectiveId MpiCommunicator::StartAllreduceSum(double* data, size_t n) {
  return Start(data, n, MPI_DOUBLE);
}

MPI_Request& MpiCommunicator::Slot(CollectiveId id) {
  if (id < 0 || static_cast<size_t>(id) >= requests_.size() || requests_[id] == MPI_REQUEST_NULL) {
    std::fprintf(stderr, "MpiCommunicator: collective id %d is not in flight\n", id);
    std::abort();
  }
  return requests_[id];
}

bool MpiCommunicator::Test(CollectiveId id) {
  int done = 0;
  MPI_Test(&Slot(id), &done, MPI_STATUS_IGNORE);  // sets the request to MPI_REQUEST_NULL when done
  return done != 0;
}

void MpiCommunicator::Wait(CollectiveId id) { MPI_Wait(&Slot(id), MPI_STATUS_IGNORE); }

void MpiCommunicator::BroadcastBytes(std::string* bytes, int root) {
  if (world_size_ == 1) return;
  uint64_t size = bytes->size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, root, comm_);
  bytes->resize(size);
  constexpr uint64_t kMaxCount = uint64_t{1} << 30;
  for (uint64_t off = 0; off < size; off += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, size - off));
    MPI_Bcast(bytes->data() + off, count, MPI_CHAR, root, comm_);
  }
}

}  // namespace engine

namespace engine {

void MpiCommunicator::GatherFloats(const float* mine, size_t n, std::vector<float>* all, int root) {
  if (rank_ == root) {
    all->resize(n * static_cast<size_t>(world_size_));
  } else {
    all->clear();
  }
  // One message per rank of at most 2^30 floats at a time (MPI counts are int).
  constexpr size_t kMaxCount = size_t{1} << 30;
  std::vector<float> piece;
  for (size_t off = 0; off < n; off += kMaxCount) {
    const size_t count = std::min(kMaxCount, n - off);
    if (rank_ == root) piece.resize(count * static_cast<size_t>(world_size_));
    MPI_Gather(mine + off, static_cast<int>(count), MPI_FLOAT,
               rank_ == root ? piece.data() : nullptr, static_cast<int>(count), MPI_FLOAT, root,
               comm_);
    if (rank_ == root) {
      for (int r = 0; r < world_size_; ++r) {
        std::copy(piece.begin() + static_cast<ptrdiff_t>(r * count),
                  piece.begin() + static_cast<ptrdiff_t>((r + 1) * count),
                  all->begin() + static_cast<ptrdiff_t>(r * n + off));
      }
    }
  }
}

}  // namespace engine
