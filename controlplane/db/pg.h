// PostgreSQL access through libpq: a fixed-size connection pool, query results as strings, and
// a transaction helper with $1-style parameters.
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

  const std::string conninfo_;
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PGconn*> idle_;
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
  explicit PgTx(PgLease lease) : lease_(std::move(lease)) {}
  PgLease lease_;
  bool open_ = true;
};

}  // namespace controlplane::db
