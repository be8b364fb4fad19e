// PostgreSQL access through libpq: a fixed-size connection pool, query results as strings, and
// a transaction helper with $1-style parameters whose statements are prepared once per
// connection.
//
// This is the only place that includes libpq. Everything above it speaks Status and PgRows.
// Connections are created lazily up to `size`; Acquire blocks on a condition variable while all
// are in use. A connection that breaks is reset when it is returned. The pool counts its
// connections and the failed statements and connection attempts made through it (Stats(), for
// the server's embody_db_* series).
#pragma once

#include <atomic>
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

// Runs one statement on a raw connection (used by the pool, transactions and the leader lock).
common::Result<PgRows> Exec(PGconn* conn, const std::string& sql, const Params& params = {});

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

// A connection borrowed from the pool; returned on destruction.
class PgLease {
 public:
  PgLease(PgPool* pool, PGconn* conn) : pool_(pool), conn_(conn) {}
  PgLease(PgLease&& o) noexcept : pool_(o.pool_), conn_(o.conn_) { o.conn_ = nullptr; }
  PgLease(const PgLease&) = delete;
  PgLease& operator=(const PgLease&) = delete;
  ~PgLease();
  PGconn* get() const { return conn_; }
  PgPool* pool() const { return pool_; }
  // The statements prepared on this connection; only the lease's holder uses them.
  PreparedStatements& prepared() const;

 private:
  PgPool* pool_;
  PGconn* conn_;
};

struct PgPoolStats {
  int size = 0;     // the most connections the pool opens
  int in_use = 0;   // lent out now
  int idle = 0;     // open, waiting in the pool
  uint64_t errors = 0;  // failed statements, commits and connection attempts so far
};

class PgPool {
 public:
  // Connects once to check the conninfo; further connections are opened on demand.
  static common::Result<std::unique_ptr<PgPool>> Open(const std::string& conninfo, int size);
  ~PgPool();

  common::Result<PgLease> Acquire();
  // A connection outside the pool (the scheduler's advisory-lock session). Caller owns it.
  common::Result<PGconn*> Connect();
  static void Close(PGconn* conn);

  PgPoolStats Stats();
  void CountError() { errors_.fetch_add(1, std::memory_order_relaxed); }

 private:
  friend class PgLease;
  PgPool(std::string conninfo, int size) : conninfo_(std::move(conninfo)), size_(size) {}
  void Release(PGconn* conn);
  PreparedStatements& PreparedFor(PGconn* conn);

  const std::string conninfo_;
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PGconn*> idle_;
  // Per open connection; an entry is dropped when its session is reset or closed.
  std::unordered_map<PGconn*, std::unique_ptr<PreparedStatements>> prepared_;
  int open_ = 0;
  std::atomic<uint64_t> errors_{0};
};

// One transaction on one pooled connection. Rolled back on destruction unless committed.
class PgTx {
 public:
  static common::Result<std::unique_ptr<PgTx>> Begin(PgPool& pool);
  ~PgTx();
  common::Result<PgRows> Exec(const std::string& sql, const Params& params = {});
  common::Status ExecScript(const std::string& sql) { return db::ExecScript(lease_.get(), sql); }
  common::Status Commit();

 private:
  explicit PgTx(PgLease lease) : lease_(std::move(lease)), prepared_(lease_.prepared()) {}
  PgLease lease_;
  PreparedStatements& prepared_;  // the lease's, looked up once
  bool open_ = true;
};

}  // namespace controlplane::db
