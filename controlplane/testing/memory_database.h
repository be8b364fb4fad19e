// The in-memory twin of the control plane's state of record: a service::Database whose stores
// keep their rows in maps, for service tests that need no PostgreSQL (LevelDB's memenv idea).
// It behaves as controlplane/db does wherever a service can tell: the same orderings, tenant
// scoping, limits and cursors, the same codes (already_exists for a taken unique key,
// invalid_argument for text PostgreSQL cannot store, internal for a broken reference), and
// ids that are never reused, even after a rollback. store_conformance.h runs one suite of store
// contracts against both. One known difference: text holding a NUL byte is refused here
// (invalid_argument), while libpq passes parameters as C strings and PostgreSQL stores the text
// cut at the NUL; jsonb refuses a NUL on both.
//
// Transactions are real: Begin() hands out a unit of work over a copy-on-write view of the
// committed tables (the first write to a table copies that table), Commit() publishes the view
// atomically, and destroying it without Commit() discards it. A failed statement aborts the unit
// as it aborts a PostgreSQL transaction: every later call, and Commit, fails.
//
// Units of work are serialised: Begin() takes one mutex and the unit holds it until Commit or
// destruction. That makes every read FOR UPDATE and every unit SERIALIZABLE, which is stronger
// than the READ COMMITTED PostgreSQL gives, and simple enough to be obviously correct. A thread
// that calls Begin() while it still holds a unit would wait for itself; that is reported as an
// error instead (services must not nest units of work).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "controlplane/service/store.h"

namespace controlplane::testing {

struct MemoryTables;  // memory_tables.h
struct MemorySequences;

class MemoryDatabase : public service::Database {
 public:
  MemoryDatabase();
  ~MemoryDatabase() override;
  MemoryDatabase(const MemoryDatabase&) = delete;
  MemoryDatabase& operator=(const MemoryDatabase&) = delete;

  // Blocks until no other unit of work is open.
  common::Result<std::unique_ptr<service::UnitOfWork>> Begin() override;

 private:
  friend class MemoryUnitOfWork;
  std::mutex mu_;                       // held by the open unit of work, if any
  std::atomic<std::thread::id> owner_;  // the thread holding mu_
  std::unique_ptr<MemoryTables> committed_;
  std::unique_ptr<MemorySequences> sequences_;  // outside transactions, as PostgreSQL's are
};

}  // namespace controlplane::testing
