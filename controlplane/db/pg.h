// PostgreSQL access through libpq: a fixed-size connection pool, query results as strings, and
// a transaction helper with $1-style parameters whose statements are prepared once per
// connection.
//
// This is the only place that includes libpq. Everything above it speaks Status and PgRows.
// Connections are created lazily up to `size`; Acquire waits (a bounded time) while all are in
// use. The pool survives the database going away and coming back (docs/architecture.md,
// "Failure behaviour"):
//  - every connection is opened with connect_timeout and TCP keepalives, and its session gets
//    statement_timeout and lock_timeout (PgOptions), so no call waits on the database unbounded;
//  - a connection is checked before it is lent (PQstatus, and a round trip only when it has
//    been idle past `check_idle_ms` or another connection was found broken since its last use);
//    broken ones are closed and replaced, and after a failed connect no new one is tried before
//    a backoff (doubling up to `reconnect_backoff_max_ms`) has passed;
//  - a statement that fails because the connection broke, the server is shutting down, or a
//    timeout fired is kUnavailable ("database unavailable, retry"), which the API answers with
//    503 and Retry-After; the transaction it was part of is never committed.
// The pool counts its connections and the failed statements and connection attempts made
// through it (Stats(), for the server's embody_db_* series).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

typedef struct pg_conn PGconn;

namespace controlplane::db {

using Param = std::optional<std::string>;  // nullopt is SQL NULL
using Params = std::vector<Param>;

inline Param P(int64_t v) { return std::to_string(v); }
inline Param P(int v) { return std::to_string(v); }
inline Param P(bool v) { return std::string(v ? "true" : "false"); }
inline Param P(std::string v) { return v; }
inline Param P(const char* v) { return std::string(v); }
// A bigint[] literal ("{1,2,3}") for `= ANY($n::bigint[])` and `unnest($n::bigint[])`: one
// parameter however many ids, so a batch is one statement.
Param IdArray(const std::vector<int64_t>& ids);

// A query result: column names and every value as text (or nullopt for NULL).
class PgRows {
 public:
  size_t size() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }
  bool IsNull(size_t row, const char* col) const;
  std::string Str(size_t row, const char* col) const;  // "" for NULL
  int64_t Int(size_t row, const char* col) const;      // 0 for NULL
  std::optional<int64_t> OptInt(size_t row, const char* col) const;
  bool Bool(size_t row, const char* col) const;

  std::vector<std::string> cols_;
  std::vector<std::vector<Param>> rows_;

 private:
  size_t Col(const char* col) const;  // aborts on an unknown column name: a programming error
};

// How connections are opened and sessions set up; the server's --db-* flags (controlplane/flags.cc).
struct PgOptions {
  int connect_timeout_s = 5;       // libpq connect_timeout
  int keepalives_idle_s = 30;      // TCP keepalives: first probe after this much silence,
  int keepalives_interval_s = 10;  // then one every interval,
  int keepalives_count = 3;        // and the connection is dead after this many unanswered
  int statement_timeout_ms = 30'000;  // per session; 0: none
  int lock_timeout_ms = 10'000;       // per session; 0: none
  int acquire_timeout_ms = 10'000;    // longest wait for a free pooled connection
  int check_idle_ms = 5'000;          // idle longer than this: a round trip before it is lent
  int reconnect_backoff_min_ms = 100;
  int reconnect_backoff_max_ms = 2'000;
  std::string application_name = "embody-server";  // as pg_stat_activity shows it
};

// The message of every kUnavailable the pool gives for a database it cannot use now.
inline constexpr const char* kDatabaseUnavailable = "database unavailable, retry";

// Runs one statement on a raw connection (used by the pool, transactions and the leader lock).
common::Result<PgRows> Exec(PGconn* conn, const std::string& sql, const Params& params = {});

// A statement's outcome without its rows.
inline common::Status OkOr(const common::Result<PgRows>& r) {
  return r.ok() ? common::Status::Ok() : r.status();
}

// The statements prepared on one connection, by their text. The SQL of the stores is a fixed
// set of texts with $n parameters, so a statement is parsed and analysed once per connection
// instead of at every call (PostgreSQL re-plans it with the parameters' values where that
// pays). Bounded all the same: past kMax texts the rest run unprepared.
struct PreparedStatements {
  static constexpr size_t kMax = 256;
  std::unordered_map<std::string, std::string> names;  // text -> statement name
};

// Exec through the connection's prepared statements, preparing `sql` on first use.
common::Result<PgRows> ExecPrepared(PGconn* conn, PreparedStatements& prepared,
                                    const std::string& sql, const Params& params = {});
// Runs several statements separated by ';' (no parameters), e.g. a migration file.
common::Status ExecScript(PGconn* conn, const std::string& sql);

class PgPool;

// One open connection of the pool and what the pool knows of it.
struct PooledConn {
  PGconn* conn = nullptr;
  PreparedStatements prepared;  // this session's; gone with it
  uint64_t checked_epoch = 0;   // the pool's break epoch when it was last known good
  std::chrono::steady_clock::time_point last_used;
};

// A connection borrowed from the pool; returned on destruction.
class PgLease {
 public:
  PgLease(PgPool* pool, PooledConn* conn) : pool_(pool), conn_(conn) {}
  PgLease(PgLease&& o) noexcept : pool_(o.pool_), conn_(o.conn_) { o.conn_ = nullptr; }
  PgLease(const PgLease&) = delete;
  PgLease& operator=(const PgLease&) = delete;
  ~PgLease();
  PGconn* get() const { return conn_->conn; }
  PgPool* pool() const { return pool_; }
  // The statements prepared on this connection; only the lease's holder uses them.
  PreparedStatements& prepared() const { return conn_->prepared; }

 private:
  PgPool* pool_;
  PooledConn* conn_;
};

struct PgPoolStats {
  int size = 0;     // the most connections the pool opens
  int in_use = 0;   // lent out now
  int idle = 0;     // open, waiting in the pool
  uint64_t errors = 0;  // failed statements, commits, connection attempts, broken connections
};

class PgPool {
 public:
  // Connects once to check the conninfo; further connections are opened on demand. Keywords
  // written in `conninfo` (connect_timeout, keepalives...) take precedence over `options`.
  static common::Result<std::unique_ptr<PgPool>> Open(const std::string& conninfo, int size,
                                                      const PgOptions& options = {});
  ~PgPool();

  // A checked connection. kUnavailable when none is free within `wait_ms` (default:
  // options.acquire_timeout_ms), or when the database cannot be reached.
  common::Result<PgLease> Acquire(std::optional<int> wait_ms = std::nullopt);
  // A connection outside the pool (the scheduler's advisory-lock session), opened and set up
  // as the pool's are, named `application_name`. Caller owns it.
  common::Result<PGconn*> Connect(const std::string& application_name = "");
  static void Close(PGconn* conn);

  PgPoolStats Stats();
  void CountError() { errors_.fetch_add(1, std::memory_order_relaxed); }
  void CountStatement() { statements_.fetch_add(1, std::memory_order_relaxed); }
  // Statements run through PgTx since the pool opened (tests count the round trips of a call).
  uint64_t StatementsRun() const { return statements_.load(std::memory_order_relaxed); }
  const PgOptions& options() const { return options_; }

 private:
  friend class PgLease;
  PgPool(std::string conninfo, int size, PgOptions options)
      : conninfo_(std::move(conninfo)), size_(size), options_(std::move(options)) {}
  void Release(PooledConn* conn);
  // Whether an idle connection may be lent: PQstatus, and a round trip when it is due one.
  bool Usable(PooledConn& conn);
  // Closes a connection that is broken or in an unknown state; the others get checked.
  void Discard(PooledConn* conn);
  void NoteConnect(bool ok, const std::string& error);

  const std::string conninfo_;
  const int size_;
  const PgOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PooledConn*> idle_;
  int open_ = 0;  // connections lent, idle or being opened
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> statements_{0};
  // Counts connections found broken; one lent with an older checked_epoch is checked first.
  std::atomic<uint64_t> break_epoch_{1};
  // After a failed connect no new connection is tried before retry_at_ (guarded by mu_).
  std::chrono::steady_clock::time_point retry_at_{};
  int backoff_ms_ = 0;
  bool down_ = false;  // the last connect failed (said once in the log, and again on recovery)
};

// One transaction on one pooled connection. Rolled back on destruction unless committed.
class PgTx {
 public:
  // BEGIN on a checked connection. A connection that turns out broken at BEGIN is replaced and
  // BEGIN tried again (nothing has been sent in the transaction yet, so this is safe).
  static common::Result<std::unique_ptr<PgTx>> Begin(PgPool& pool);
  ~PgTx();
  common::Result<PgRows> Exec(const std::string& sql, const Params& params = {});
  common::Status ExecScript(const std::string& sql) { return db::ExecScript(lease_.get(), sql); }
  // kUnavailable when the connection broke during COMMIT: whether it committed is then unknown
  // (a client retrying with an Idempotency-Key finds out).
  common::Status Commit();

 private:
  explicit PgTx(PgLease lease) : lease_(std::move(lease)), prepared_(lease_.prepared()) {}
  PgLease lease_;
  PreparedStatements& prepared_;  // the lease's, looked up once
  bool open_ = true;
};

}  // namespace controlplane::db
