#include "controlplane/db/pg.h"

#include <cstdio>
#include <cstdlib>

#include <libpq-fe.h>

namespace controlplane::db {

using common::Result;
using common::Status;

size_t PgRows::Col(const char* col) const {
  for (size_t i = 0; i < cols_.size(); ++i) {
    if (cols_[i] == col) return i;
  }
  std::fprintf(stderr, "PgRows: no column %s in result\n", col);
  std::abort();
}

bool PgRows::IsNull(size_t row, const char* col) const { return !rows_[row][Col(col)]; }

std::string PgRows::Str(size_t row, const char* col) const {
  const Param& v = rows_[row][Col(col)];
  return v ? *v : std::string();
}

int64_t PgRows::Int(size_t row, const char* col) const {
  const Param& v = rows_[row][Col(col)];
  return v ? std::stoll(*v) : 0;
}

std::optional<int64_t> PgRows::OptInt(size_t row, const char* col) const {
  const Param& v = rows_[row][Col(col)];
  if (!v) return std::nullopt;
  return std::stoll(*v);
}

bool PgRows::Bool(size_t row, const char* col) const {
  const Param& v = rows_[row][Col(col)];
  return v && *v == "t";
}

Status ExecScript(PGconn* conn, const std::string& sql) {
  PGresult* res = PQexec(conn, sql.c_str());
  ExecStatusType st = PQresultStatus(res);
  std::string msg = PQresultErrorMessage(res);
  PQclear(res);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Status::Ok();
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  return common::Internal("database: " + msg);
}

namespace {

// A statement's result as PgRows, or its error as a Status; frees `res`.
Result<PgRows> Collect(PGconn* conn, PGresult* res) {
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    std::string msg = PQresultErrorMessage(res);
    const char* sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    std::string code = sqlstate ? sqlstate : "";
    PQclear(res);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    if (PQstatus(conn) != CONNECTION_OK) return common::Unavailable("database: " + msg);
    if (code == "23505") return Status(common::Code::kAlreadyExists, "database: " + msg);
    if (code == "40001" || code == "40P01") return common::Unavailable("database: " + msg);
    // Text from a request that PostgreSQL cannot store: bytes that are not UTF-8 (22021), or a
    // NUL, which neither text nor jsonb (\u0000) holds (22P05). The request is at fault; the
    // database's message is not repeated to the client.
    if (code == "22021" || code == "22P05") {
      return common::InvalidArgument("text must be valid UTF-8 without NUL characters");
    }
    return common::Internal("database: " + msg);
  }
  PgRows rows;
  int nf = PQnfields(res), nt = PQntuples(res);
  for (int c = 0; c < nf; ++c) rows.cols_.push_back(PQfname(res, c));
  rows.rows_.resize(nt);
  for (int r = 0; r < nt; ++r) {
    rows.rows_[r].reserve(nf);
    for (int c = 0; c < nf; ++c) {
      if (PQgetisnull(res, r, c)) {
        rows.rows_[r].push_back(std::nullopt);
      } else {
        rows.rows_[r].push_back(std::string(PQgetvalue(res, r, c), PQgetlength(res, r, c)));
      }
    }
  }
  PQclear(res);
  return rows;
}

std::vector<const char*> Values(const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const Param& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

// Prepared statements keep PostgreSQL from parsing and analysing the same text again, but by
// default it may also switch a statement to one generic plan for all parameter values after a
// few executions. Our optional filters are written `($1 IS NULL OR tenant_id = $1)`, which only
// a plan for the actual values reduces to an index condition; a generic plan would scan. Every
// execution is therefore planned for its values, as it was before statements were prepared.
void SetUpSession(PGconn* conn) {
  PQclear(PQexec(conn, "SET plan_cache_mode = force_custom_plan"));
}

}  // namespace

Result<PgRows> Exec(PGconn* conn, const std::string& sql, const Params& params) {
  const std::vector<const char*> values = Values(params);
  return Collect(conn, PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                    values.data(), nullptr, nullptr, 0));
}

Result<PgRows> ExecPrepared(PGconn* conn, PreparedStatements& prepared, const std::string& sql,
                            const Params& params) {
  auto it = prepared.names.find(sql);
  if (it == prepared.names.end()) {
    if (prepared.names.size() >= PreparedStatements::kMax) return Exec(conn, sql, params);
    std::string name = "embody_" + std::to_string(prepared.names.size() + 1);
    PGresult* res =
        PQprepare(conn, name.c_str(), sql.c_str(), static_cast<int>(params.size()), nullptr);
    const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    // Not prepared (a bad statement, an aborted transaction, a lost connection): run it as it
    // is, which reports the error as Exec always has.
    if (!ok) return Exec(conn, sql, params);
    it = prepared.names.emplace(sql, std::move(name)).first;
  }
  const std::vector<const char*> values = Values(params);
  return Collect(conn, PQexecPrepared(conn, it->second.c_str(), static_cast<int>(values.size()),
                                      values.data(), nullptr, nullptr, 0));
}

PgLease::~PgLease() {
  if (conn_) pool_->Release(conn_);
}

PreparedStatements& PgLease::prepared() const { return pool_->PreparedFor(conn_); }

Result<std::unique_ptr<PgPool>> PgPool::Open(const std::string& conninfo, int size) {
  std::unique_ptr<PgPool> pool(new PgPool(conninfo, size));
  auto conn = pool->Connect();
  if (!conn.ok()) return conn.status();
  pool->Release(*conn);
  std::lock_guard<std::mutex> lock(pool->mu_);
  pool->open_ = 1;
  return pool;
}

PgPool::~PgPool() {
  for (PGconn* c : idle_) PQfinish(c);
}

PreparedStatements& PgPool::PreparedFor(PGconn* conn) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<PreparedStatements>& p = prepared_[conn];
  if (!p) p = std::make_unique<PreparedStatements>();
  return *p;
}

Result<PGconn*> PgPool::Connect() {
  PGconn* conn = PQconnectdb(conninfo_.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return common::Unavailable("cannot connect to database: " + msg);
  }
  // Server notices ("relation already exists, skipping") are not errors; keep stderr for logs.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  SetUpSession(conn);
  return conn;
}

void PgPool::Close(PGconn* conn) { PQfinish(conn); }

Result<PgLease> PgPool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !idle_.empty() || open_ < size_; });
  if (!idle_.empty()) {
    PGconn* c = idle_.back();
    idle_.pop_back();
    return PgLease(this, c);
  }
  ++open_;
  lock.unlock();
  auto conn = Connect();
  if (!conn.ok()) {
    CountError();
    lock.lock();
    --open_;
    cv_.notify_one();
    return conn.status();
  }
  return PgLease(this, *conn);
}

PgPoolStats PgPool::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  PgPoolStats s;
  s.size = size_;
  s.idle = static_cast<int>(idle_.size());
  s.in_use = open_ - s.idle;
  s.errors = errors_.load(std::memory_order_relaxed);
  return s;
}

void PgPool::Release(PGconn* conn) {
  bool reset = false;
  if (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE) {
    // A broken session, or one left inside a transaction: start it over.
    PQreset(conn);
    if (PQstatus(conn) == CONNECTION_OK) SetUpSession(conn);
    reset = true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  // A new session has none of the old one's prepared statements.
  if (reset) prepared_.erase(conn);
  if (PQstatus(conn) != CONNECTION_OK) {
    prepared_.erase(conn);
    PQfinish(conn);
    --open_;
  } else {
    idle_.push_back(conn);
  }
  cv_.notify_one();
}

Result<std::unique_ptr<PgTx>> PgTx::Begin(PgPool& pool) {
  auto lease = pool.Acquire();
  if (!lease.ok()) return lease.status();
  auto r = db::Exec(lease->get(), "BEGIN");
  if (!r.ok()) {
    pool.CountError();
    return r.status();
  }
  return std::unique_ptr<PgTx>(new PgTx(std::move(lease.value())));
}

PgTx::~PgTx() {
  if (open_) (void)db::Exec(lease_.get(), "ROLLBACK");
}

Result<PgRows> PgTx::Exec(const std::string& sql, const Params& params) {
  auto r = db::ExecPrepared(lease_.get(), prepared_, sql, params);
  if (!r.ok()) lease_.pool()->CountError();
  return r;
}

Status PgTx::Commit() {
  open_ = false;
  auto r = db::Exec(lease_.get(), "COMMIT");
  if (!r.ok()) lease_.pool()->CountError();
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace controlplane::db
