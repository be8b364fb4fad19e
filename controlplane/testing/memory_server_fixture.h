// Test fixture for HTTP suites that need no PostgreSQL: ServerFixture (server_fixture.h) with
// the real server built by Server::Build on the in-memory twin of the stores (memory_database.h),
// one per suite. The store has none of the optional parts of a shared store (server.h,
// ServerStore): the server leads the scheduler alone, its principal cache is on from the start,
// the pool gauges of /metrics stay at 0 and /readyz answers whenever it serves.
#pragma once

#include <memory>

#include "controlplane/testing/memory_database.h"
#include "controlplane/testing/server_fixture.h"

namespace controlplane {

class MemoryServerBackend {
 public:
  static common::Result<std::unique_ptr<Server>> StartOn(ServerOptions& o) {
    memory_ = new testing::MemoryDatabase;
    ServerStore store;
    store.database = memory_;
    return Server::Build(o, store);
  }
  // Another server on the same store, as a second replica of the first would be.
  static common::Result<std::unique_ptr<Server>> StartAnother(ServerOptions& o) {
    ServerStore store;
    store.database = memory_;
    return Server::Build(o, store);
  }
  // The store the server is built on, for a test that writes what no route writes.
  static service::Database& Store() { return *memory_; }
  static void StopStore() {
    delete memory_;
    memory_ = nullptr;
  }

  static inline testing::MemoryDatabase* memory_ = nullptr;
};

using MemoryServerFixture = ServerFixture<MemoryServerBackend>;

}  // namespace controlplane
