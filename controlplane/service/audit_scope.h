// The audit row of the call a thread is serving, written inside the call's own transaction.
//
// The HTTP router opens an AuditScope around every audited handler. While it is open, the first
// unit of work that commits on that thread (opened through AuditedDatabase) appends the row just
// before its COMMIT: the row is atomic with the change it records, and costs one INSERT instead
// of a transaction and a WAL flush of its own. A call that commits nothing (refused before any
// transaction, a validation error, a replay) leaves written() empty, and the router then writes
// the row on its own, as for any refusal.
//
// At commit the answer is not built yet, so the row says what the call will answer if it
// succeeds (the scope's draft). The router compares that with the answer actually sent and
// amends the row when they differ (a failure after the commit, an unexpected status), so the
// stored row always ends with the true status and outcome.
//
// Why a scope on the thread rather than an audit parameter on every service call: services open
// their units of work deep inside (JobsService::Submit opens a second one on a lost idempotency
// race), so every service method and every helper between it and Database::Begin would have to
// carry the context, and one that dropped it would commit its mutation on the slow path without
// anyone noticing. The router installs the scope once, around every audited handler, and every
// unit of work the call opens is covered with no code in handlers or services. The price: work
// handed to another thread is not covered (none is); its commit would still be audited, by the
// router, afterwards. The one exception is the submission batcher (submit_batcher.h): the
// handler thread waits while the batcher's thread writes the call's row in the batch's
// transaction through HandedOff() below, so the row stays atomic with the job.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "controlplane/service/store.h"

namespace controlplane::service {

class AuditScope {
 public:
  // `draft` builds the row as it reads if the call succeeds: called at most once, by the unit of
  // work that commits first, on this thread, with this scope (for the noted target).
  explicit AuditScope(std::function<AuditRecord(const AuditScope&)> draft);
  ~AuditScope();
  AuditScope(const AuditScope&) = delete;
  AuditScope& operator=(const AuditScope&) = delete;

  // The row a unit of work committed for this call (with its id), or nullopt.
  const std::optional<AuditRecord>& written() const { return written_; }
  // What the call acted on as a service says it ("job 12" and its tenant), for calls whose
  // handler learns it only from the answer: the draft uses it at commit. "" / 0: not noted.
  const std::string& noted_target() const { return noted_target_; }
  int64_t noted_target_tenant() const { return noted_target_tenant_; }

  // For services: notes the target of the current call; nothing when no scope is open.
  static void NoteTarget(std::string target, int64_t tenant_id);

  // For work handed to another thread while this thread waits for its answer: the scope open on
  // this thread (nullptr outside one). The other thread may call DraftFor and MarkWritten until
  // it answers; the waiting thread must not touch the scope meanwhile, and the answer's hand-over
  // (a promise) orders their writes.
  static AuditScope* HandedOff() { return Current(); }
  // The row this call commits as a service acting on `target` of `target_tenant` drafts it;
  // nullopt when a unit of work of this call already wrote one.
  std::optional<AuditRecord> DraftFor(std::string target, int64_t target_tenant);
  // `row` (with its id) was committed for this call by the thread it was handed to.
  void MarkWritten(AuditRecord row) { written_ = std::move(row); }

 private:
  friend class AuditedDatabase;
  static AuditScope* Current();

  std::function<AuditRecord(const AuditScope&)> draft_;
  std::optional<AuditRecord> written_;
  std::string noted_target_;
  int64_t noted_target_tenant_ = 0;
  uint64_t serial_ = 0;
  AuditScope* outer_ = nullptr;
};

// A Database whose units of work, opened on a thread inside an AuditScope, write the scope's row
// in their own transaction at Commit (once per scope: the first commit wins). Outside a scope it
// hands out the inner database's units of work untouched.
class AuditedDatabase : public Database {
 public:
  explicit AuditedDatabase(Database& inner) : inner_(inner) {}
  Result<std::unique_ptr<UnitOfWork>> Begin() override;

 private:
  Database& inner_;
};

}  // namespace controlplane::service
