#include "controlplane/db/pg.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <libpq-fe.h>

#include "common/log.h"
#include "common/parse_int.h"

namespace controlplane::db {

using common::Result;
using common::Status;

namespace {

// An integer column's text. Anything else means the query read a non-integer column (a numeric
// average, a float) as an integer: a programming error, reported like an unknown column.
int64_t IntText(const std::string& text, const char* col) {
  auto v = common::ParseInt64(text);
  if (!v.ok()) {
    std::fprintf(stderr, "PgRows: column %s holds '%.40s', not an integer\n", col, text.c_str());
    std::abort();
  }
  return *v;
}

}  // namespace

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
  return v ? IntText(*v, col) : 0;
}

std::optional<int64_t> PgRows::OptInt(size_t row, const char* col) const {
  const Param& v = rows_[row][Col(col)];
  if (!v) return std::nullopt;
  return IntText(*v, col);
}

bool PgRows::Bool(size_t row, const char* col) const {
  const Param& v = rows_[row][Col(col)];
  return v && *v == "t";
}

namespace {

// SQLSTATEs that say the database cannot serve this now, not that the request is wrong: the
// connection class (08), the server shutting down or starting (57P01-57P03), a resource it
// lacks (53: too many connections, out of memory, disk full), a statement or lock wait cut
// short by our timeouts (57014, 55P03), a serialization failure or deadlock (40001, 40P01).
// All of these are worth retrying.
const char* UnavailableReason(PGconn* conn, const std::string& code) {
  if (PQstatus(conn) != CONNECTION_OK) return "connection lost";
  if (code.rfind("08", 0) == 0) return "connection lost";
  if (code.rfind("57P0", 0) == 0) return "server shutting down or starting";
  if (code.rfind("53", 0) == 0) return "server out of resources";
  if (code == "57014") return "statement timed out";
  if (code == "55P03") return "lock wait timed out";
  if (code == "40001" || code == "40P01") return "transaction conflict";
  return nullptr;
}

std::string TrimmedError(PGresult* res, PGconn* conn) {
  std::string msg = res ? PQresultErrorMessage(res) : "";
  if (msg.empty()) msg = PQerrorMessage(conn);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

// A statement's error as a Status; the database's own words only where they help the caller
// and say nothing about the server (not for an unreachable database).
Status ErrorStatus(PGconn* conn, PGresult* res) {
  const char* sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string code = sqlstate ? sqlstate : "";
  const std::string msg = TrimmedError(res, conn);
  if (const char* why = UnavailableReason(conn, code)) {
    return common::Unavailable(std::string(kDatabaseUnavailable) + " (" + why + ")");
  }
  if (code == "23505") return Status(common::Code::kAlreadyExists, "database: " + msg);
  // Text from a request that PostgreSQL cannot store: bytes that are not UTF-8 (22021), or a
  // NUL, which neither text nor jsonb (\u0000) holds (22P05). The request is at fault; the
  // database's message is not repeated to the client.
  if (code == "22021" || code == "22P05") {
    return common::InvalidArgument("text must be valid UTF-8 without NUL characters");
  }
  return common::Internal("database: " + msg);
}

}  // namespace

Status ExecScript(PGconn* conn, const std::string& sql) {
  PGresult* res = PQexec(conn, sql.c_str());
  ExecStatusType st = PQresultStatus(res);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    PQclear(res);
    return Status::Ok();
  }
  Status error = ErrorStatus(conn, res);
  PQclear(res);
  return error;
}

namespace {

// A statement's result as PgRows, or its error as a Status; frees `res` (which may be null:
// libpq's answer when it could not even send the statement).
Result<PgRows> Collect(PGconn* conn, PGresult* res) {
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    Status error = ErrorStatus(conn, res);
    PQclear(res);
    return error;
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

namespace {

using SteadyClock = std::chrono::steady_clock;

// Prepared statements keep PostgreSQL from parsing and analysing the same text again, but by
// default it may also switch a statement to one generic plan for all parameter values after a
// few executions. Our optional filters are written `($1 IS NULL OR tenant_id = $1)`, which only
// a plan for the actual values reduces to an index condition; a generic plan would scan. Every
// execution is therefore planned for its values, as it was before statements were prepared.
// The timeouts bound every statement and lock wait of the session (PgOptions).
Status SetUpSession(PGconn* conn, const PgOptions& o) {
  const std::string sql = "SET plan_cache_mode = force_custom_plan; SET statement_timeout = " +
                          std::to_string(o.statement_timeout_ms) + "; SET lock_timeout = " +
                          std::to_string(o.lock_timeout_ms);
  return ExecScript(conn, sql);
}

// libpq's keyword arrays: our defaults first, then `dbname` holding the operator's conninfo,
// which libpq expands in place, so keywords written there win over ours.
PGconn* OpenConnection(const std::string& conninfo, const PgOptions& o,
                       const std::string& application_name) {
  const std::string connect_timeout = std::to_string(o.connect_timeout_s);
  const std::string idle = std::to_string(o.keepalives_idle_s);
  const std::string interval = std::to_string(o.keepalives_interval_s);
  const std::string count = std::to_string(o.keepalives_count);
  const char* keywords[] = {"connect_timeout", "keepalives", "keepalives_idle",
                            "keepalives_interval", "keepalives_count", "application_name",
                            "dbname", nullptr};
  const char* values[] = {connect_timeout.c_str(), "1", idle.c_str(), interval.c_str(),
                          count.c_str(), application_name.c_str(), conninfo.c_str(), nullptr};
  return PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
}

}  // namespace

Result<std::unique_ptr<PgPool>> PgPool::Open(const std::string& conninfo, int size,
                                             const PgOptions& options) {
  std::unique_ptr<PgPool> pool(new PgPool(conninfo, size, options));
  auto conn = pool->Connect();
  if (!conn.ok()) return conn.status();
  auto* pc = new PooledConn;
  pc->conn = *conn;
  pc->checked_epoch = pool->break_epoch_.load();
  pc->last_used = SteadyClock::now();
  std::lock_guard<std::mutex> lock(pool->mu_);
  pool->idle_.push_back(pc);
  pool->open_ = 1;
  return pool;
}

PgPool::~PgPool() {
  for (PooledConn* c : idle_) {
    PQfinish(c->conn);
    delete c;
  }
}

Result<PGconn*> PgPool::Connect(const std::string& application_name) {
  PGconn* conn = OpenConnection(
      conninfo_, options_, application_name.empty() ? options_.application_name : application_name);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    return common::Unavailable("cannot connect to database: " + msg);
  }
  // Server notices ("relation already exists, skipping") are not errors; keep stderr for logs.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  Status st = SetUpSession(conn, options_);
  if (!st.ok()) {
    PQfinish(conn);
    return common::Unavailable("cannot set up a database session: " + st.message());
  }
  return conn;
}

void PgPool::Close(PGconn* conn) { PQfinish(conn); }

void PgPool::NoteConnect(bool ok, const std::string& error) {
  // Called with mu_ held.
  if (ok) {
    if (down_) common::LogInfo("database reachable again");
    down_ = false;
    backoff_ms_ = 0;
    retry_at_ = {};
    return;
  }
  if (!down_) common::LogWarn("database unreachable", {{"error", error}});
  down_ = true;
  backoff_ms_ = backoff_ms_ == 0 ? options_.reconnect_backoff_min_ms
                                 : std::min(2 * backoff_ms_, options_.reconnect_backoff_max_ms);
  retry_at_ = SteadyClock::now() + std::chrono::milliseconds(backoff_ms_);
}

bool PgPool::Usable(PooledConn& c) {
  if (PQstatus(c.conn) != CONNECTION_OK) return false;
  const uint64_t epoch = break_epoch_.load();
  const bool due = c.checked_epoch != epoch ||
                   SteadyClock::now() - c.last_used > std::chrono::milliseconds(options_.check_idle_ms);
  if (!due) return true;
  // The cheapest round trip there is; it also makes libpq notice a connection the server
  // closed while it sat idle (a restart, pg_terminate_backend).
  PGresult* res = PQexec(c.conn, "");
  const bool ok = PQresultStatus(res) == PGRES_EMPTY_QUERY && PQstatus(c.conn) == CONNECTION_OK;
  PQclear(res);
  if (ok) c.checked_epoch = epoch;
  return ok;
}

void PgPool::Discard(PooledConn* c) {
  // Called without mu_. Connections that were fine a moment ago may share this one's fate (a
  // restarted server closes them all): every other one is checked before its next use.
  break_epoch_.fetch_add(1);
  CountError();
  PQfinish(c->conn);
  delete c;
  std::lock_guard<std::mutex> lock(mu_);
  --open_;
  cv_.notify_one();
}

Result<PgLease> PgPool::Acquire(std::optional<int> wait_ms) {
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(wait_ms.value_or(options_.acquire_timeout_ms));
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!cv_.wait_until(lock, deadline, [&] { return !idle_.empty() || open_ < size_; })) {
      return common::Unavailable(std::string(kDatabaseUnavailable) +
                                 " (no free connection: the database is slow or busy)");
    }
    if (!idle_.empty()) {
      PooledConn* c = idle_.back();
      idle_.pop_back();
      lock.unlock();
      if (Usable(*c)) return PgLease(this, c);
      Discard(c);  // and try the next one, or open a new one
      lock.lock();
      continue;
    }
    // A new connection, unless the last attempt failed too recently.
    if (SteadyClock::now() < retry_at_) {
      return common::Unavailable(std::string(kDatabaseUnavailable) + " (reconnecting)");
    }
    ++open_;
    lock.unlock();
    auto conn = Connect();
    lock.lock();
    NoteConnect(conn.ok(), conn.ok() ? "" : conn.status().message());
    if (!conn.ok()) {
      CountError();
      --open_;
      cv_.notify_one();
      return common::Unavailable(std::string(kDatabaseUnavailable) + " (cannot connect)");
    }
    auto* c = new PooledConn;
    c->conn = *conn;
    c->checked_epoch = break_epoch_.load();
    return PgLease(this, c);
  }
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

void PgPool::Release(PooledConn* c) {
  bool ok = PQstatus(c->conn) == CONNECTION_OK;
  const PGTransactionStatusType tx = ok ? PQtransactionStatus(c->conn) : PQTRANS_UNKNOWN;
  if (ok && (tx == PQTRANS_INTRANS || tx == PQTRANS_INERROR)) {
    // Left inside a transaction (a unit of work that neither committed nor rolled back).
    PGresult* res = PQexec(c->conn, "ROLLBACK");
    PQclear(res);
    ok = PQstatus(c->conn) == CONNECTION_OK && PQtransactionStatus(c->conn) == PQTRANS_IDLE;
  } else if (ok && tx != PQTRANS_IDLE) {
    ok = false;  // a statement still running, or a state libpq cannot tell: start afresh
  }
  if (!ok) return Discard(c);
  c->last_used = SteadyClock::now();
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(c);
  cv_.notify_one();
}

Result<std::unique_ptr<PgTx>> PgTx::Begin(PgPool& pool) {
  Status last;
  // A connection the server closed since it was checked fails at BEGIN; nothing has happened
  // in the transaction yet, so another connection may be tried. Bounded: each failure closes a
  // connection, and the pool then checks all the others before lending them.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto lease = pool.Acquire();
    if (!lease.ok()) return lease.status();
    auto r = db::Exec(lease->get(), "BEGIN");
    if (r.ok()) return std::unique_ptr<PgTx>(new PgTx(std::move(lease.value())));
    pool.CountError();
    last = r.status();
    if (PQstatus(lease->get()) == CONNECTION_OK) break;
  }
  return last;
}

PgTx::~PgTx() {
  if (open_) (void)db::Exec(lease_.get(), "ROLLBACK");
}

Param IdArray(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(ids[i]);
  }
  return out + "}";
}

Result<PgRows> PgTx::Exec(const std::string& sql, const Params& params) {
  lease_.pool()->CountStatement();
  auto r = db::ExecPrepared(lease_.get(), prepared_, sql, params);
  if (!r.ok()) lease_.pool()->CountError();
  return r;
}

Status PgTx::Commit() {
  open_ = false;
  PGconn* conn = lease_.get();
  PGresult* res = PQexec(conn, "COMMIT");
  if (PQresultStatus(res) != PGRES_COMMAND_OK) {
    Status error = ErrorStatus(conn, res);
    PQclear(res);
    lease_.pool()->CountError();
    return error;
  }
  // PostgreSQL answers COMMIT of a transaction that an earlier statement aborted with the
  // command tag ROLLBACK, not an error: nothing was written, and the caller must not think so.
  const bool rolled_back = std::strcmp(PQcmdStatus(res), "ROLLBACK") == 0;
  PQclear(res);
  if (rolled_back) {
    lease_.pool()->CountError();
    return common::Internal("database: COMMIT rolled back a transaction a statement had failed");
  }
  return Status::Ok();
}

}  // namespace controlplane::db
