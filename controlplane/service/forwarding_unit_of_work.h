// A unit of work that hands every store and its commit to another one: the base of decorators
// that change one thing and forward the rest (audit_scope.cc writes the scope's row before the
// commit; principal_cache.cc watches the tenant store and clears the cache after it).
#pragma once

#include <memory>
#include <utility>

#include "controlplane/service/store.h"

namespace controlplane::service {

class ForwardingUnitOfWork : public UnitOfWork {
 public:
  explicit ForwardingUnitOfWork(std::unique_ptr<UnitOfWork> inner) : inner_(std::move(inner)) {}
  JobStore& jobs() override { return inner_->jobs(); }
  AllocationStore& allocations() override { return inner_->allocations(); }
  NodeStore& nodes() override { return inner_->nodes(); }
  EventStore& events() override { return inner_->events(); }
  LogIndex& logs() override { return inner_->logs(); }
  TenantStore& tenants() override { return inner_->tenants(); }
  AuditStore& audit() override { return inner_->audit(); }
  FairShareStore& fair_share() override { return inner_->fair_share(); }
  CheckpointIndex& checkpoints() override { return inner_->checkpoints(); }
  DatasetStore& datasets() override { return inner_->datasets(); }
  LeaderFence& leader() override { return inner_->leader(); }
  ForecastStore& forecasts() override { return inner_->forecasts(); }
  PipelineStore& pipelines() override { return inner_->pipelines(); }
  Status Commit() override { return inner_->Commit(); }

 protected:
  UnitOfWork& inner() { return *inner_; }

 private:
  std::unique_ptr<UnitOfWork> inner_;
};

}  // namespace controlplane::service
