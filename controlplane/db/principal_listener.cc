#include "controlplane/db/principal_listener.h"

#include <poll.h>

#include <cerrno>
#include <chrono>

#include <libpq-fe.h>

#include "common/log.h"

namespace controlplane::db {

namespace {
using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}
}  // namespace

PrincipalListener::PrincipalListener(PgPool& pool, service::PrincipalCache& cache, Options options)
    : pool_(pool), cache_(cache), options_(options) {}

PrincipalListener::~PrincipalListener() { Stop(); }

void PrincipalListener::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void PrincipalListener::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  cache_.SetEnabled(false);
}

bool PrincipalListener::WaitStop(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stop_; });
}

void PrincipalListener::Run() {
  bool said_down = false;
  while (!WaitStop(0)) {
    if (ListenOnce()) {
      said_down = false;
    } else if (!said_down) {
      common::LogWarn("cannot listen for token and tenant changes; the principal cache is off");
      said_down = true;
    }
    if (WaitStop(options_.reconnect_ms)) break;
  }
}

bool PrincipalListener::ListenOnce() {
  auto c = pool_.Connect("embody-principal-listener");
  if (!c.ok()) return false;
  PGconn* conn = *c;
  if (!Exec(conn, std::string("LISTEN ") + kPrincipalsChannel).ok()) {
    PgPool::Close(conn);
    return false;
  }
  // From here on every committed change is notified to this session; what was committed
  // before is read afresh, since turning the cache on empties it.
  cache_.SetEnabled(true);
  listening_ = true;
  sessions_.fetch_add(1);
  const int sock = PQsocket(conn);
  Clock::time_point heard = Clock::now(), pinged{};
  bool ping_out = false;
  std::string lost;
  while (!WaitStop(0)) {
    pollfd p{sock, POLLIN, 0};
    const int n = ::poll(&p, 1, options_.poll_ms);
    if (n < 0 && errno != EINTR) {
      lost = "poll failed";
      break;
    }
    if (n > 0) {
      if (!PQconsumeInput(conn)) {
        lost = "connection lost";
        break;
      }
      heard = Clock::now();
      uint64_t notes = 0;
      while (PGnotify* note = PQnotifies(conn)) {
        ++notes;
        PQfreemem(note);
      }
      if (notes > 0) {
        cache_.Clear();
        notifications_.fetch_add(notes);
      }
      while (ping_out && !PQisBusy(conn)) {
        PGresult* res = PQgetResult(conn);
        if (!res) {
          ping_out = false;
          break;
        }
        const bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
        PQclear(res);
        if (!ok) {
          lost = "ping failed";
          break;
        }
      }
      if (!lost.empty()) break;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
      lost = "connection lost";
      break;
    }
    if (ping_out && MsSince(pinged) > options_.ping_timeout_ms) {
      lost = "ping unanswered";
      break;
    }
    if (!ping_out && MsSince(heard) > options_.ping_interval_ms) {
      if (!PQsendQuery(conn, "SELECT 1")) {
        lost = "connection lost";
        break;
      }
      ping_out = true;
      pinged = Clock::now();
    }
  }
  // Off before the session closes: from now on nothing would tell this replica of a change.
  cache_.SetEnabled(false);
  listening_ = false;
  PgPool::Close(conn);
  if (!lost.empty()) {
    common::LogWarn(
        "stopped listening for token and tenant changes; the principal cache is off "
        "until it listens again",
        {{"reason", lost}});
  }
  return true;
}

}  // namespace controlplane::db
