#include "controlplane/service/audit_scope.h"

#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/forwarding_unit_of_work.h"
#include "controlplane/service/leader_fence.h"

namespace controlplane::service {

namespace {

thread_local AuditScope* current_scope = nullptr;
// Tells scopes apart even when a later one reuses an earlier one's address on the stack.
thread_local uint64_t scopes_opened = 0;

// A unit of work that writes the open scope's row before it commits; otherwise the inner one.
class AuditedUnitOfWork : public ForwardingUnitOfWork {
 public:
  AuditedUnitOfWork(std::unique_ptr<UnitOfWork> inner, std::function<Status()> before_commit,
                    std::function<void()> after_commit)
      : ForwardingUnitOfWork(std::move(inner)),
        before_commit_(std::move(before_commit)),
        after_commit_(std::move(after_commit)) {}
  Status Commit() override {
    EMBODY_RETURN_IF_ERROR(before_commit_());
    EMBODY_RETURN_IF_ERROR(inner().Commit());
    after_commit_();
    return Status::Ok();
  }

 private:
  std::function<Status()> before_commit_;
  std::function<void()> after_commit_;
};

}  // namespace

AuditScope::AuditScope(std::function<AuditRecord(const AuditScope&)> draft)
    : draft_(std::move(draft)), serial_(++scopes_opened), outer_(current_scope) {
  current_scope = this;
}

AuditScope::~AuditScope() { current_scope = outer_; }

AuditScope* AuditScope::Current() { return current_scope; }

void AuditScope::NoteTarget(std::string target, int64_t tenant_id) {
  if (!current_scope) return;
  current_scope->noted_target_ = std::move(target);
  current_scope->noted_target_tenant_ = tenant_id;
}

std::optional<AuditRecord> AuditScope::DraftFor(std::string target, int64_t target_tenant) {
  if (written_) return std::nullopt;
  noted_target_ = std::move(target);
  noted_target_tenant_ = target_tenant;
  return draft_(*this);
}

Result<std::unique_ptr<UnitOfWork>> AuditedDatabase::Begin() {
  EMBODY_ASSIGN_OR_RETURN(uow, inner_.Begin());
  const AuditScope* opened_in = AuditScope::Current();
  if (!opened_in) return std::move(uow);
  // Only the scope this unit of work was opened in, still open, gets its row from it.
  auto scope_now = [serial = opened_in->serial_]() -> AuditScope* {
    AuditScope* s = AuditScope::Current();
    return s && s->serial_ == serial ? s : nullptr;
  };
  // The row is drafted at commit, not here: by then the handler and the service have said what
  // the call acts on. `pending` carries it from before the COMMIT to after it succeeded.
  auto pending = std::make_shared<std::optional<AuditRecord>>();
  UnitOfWork* raw = uow.get();
  auto before = [scope_now, raw, pending]() -> Status {
    AuditScope* scope = scope_now();
    if (!scope || scope->written_) return Status::Ok();
    AuditRecord row = scope->draft_(*scope);
    EMBODY_ASSIGN_OR_RETURN(id, raw->audit().Append(row));
    row.id = id;
    *pending = std::move(row);
    return Status::Ok();
  };
  auto after = [scope_now, pending] {
    AuditScope* scope = scope_now();
    if (*pending && scope) scope->written_ = std::move(*pending);
  };
  return std::unique_ptr<UnitOfWork>(
      std::make_unique<AuditedUnitOfWork>(std::move(uow), before, after));
}

}  // namespace controlplane::service
