#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "common/http/gated_server.h"
#include "controlplane/http/routes.h"
#include "controlplane/service/log_files.h"

namespace controlplane::http {

using A = Router::Auth;

namespace {

// A follow reads the job's logs every kFollowPoll while they grow, backing off to
// kFollowIdlePoll while they do not; between reads it looks every kFollowPoll whether the client
// is still there, so a dropped stream frees its thread within that.
constexpr auto kFollowPoll = std::chrono::milliseconds(200);
constexpr int kFollowIdlePolls = 5;  // kFollowPoll slices between reads of a quiet log
constexpr size_t kReadChunk = 256 * 1024;

// The state of one log response: which job, which rank (or all), and how far it has read.
struct LogCursor {
  service::Principal principal;
  int64_t job_id = 0;
  bool one_rank = false;
  int rank = 0;
  // Pinned at the first read (the latest attempt then, unless the request named one), so that a
  // follow does not jump into another attempt's files part way.
  std::optional<int> attempt;
  int64_t offset = 0;
  service::LogMerger merger;

  // New text since the last call. With `final`, partial last lines too.
  common::Result<std::string> Next(service::JobsService& jobs, bool* terminal, bool final) {
    auto snap = jobs.Logs(principal, job_id, attempt);
    if (!snap.ok()) return snap.status();
    attempt = snap->attempt;
    *terminal = snap->terminal;
    // Partial last lines are flushed only on the final read: a finished job's long line may
    // still span several reads, and must come back as one line.
    if (!one_rank) return merger.Poll(snap->logs, final);
    for (const auto& log : snap->logs) {
      if (log.rank != rank) continue;
      auto data = service::LogFiles::Read(log.path, offset, kReadChunk);
      if (!data.ok()) return data.status();
      offset += static_cast<int64_t>(data->size());
      return data;
    }
    return std::string();
  }
};

}  // namespace

void AddLogRoutes(Router& router, const ApiDeps& deps, const std::atomic<bool>& stopping) {
  service::JobsService& jobs = *deps.jobs;
  router.Handle("GET", "/v1/jobs/{id}/logs", A::kBearer,
      [&jobs, &stopping](const httplib::Request& req, httplib::Response& res,
                         RequestContext& ctx) {
        auto id = PathId(req, 1, "job");
        if (!id.ok()) return RespondError(res, id.status());
        auto cursor = std::make_shared<LogCursor>();
        cursor->principal = ctx.principal;
        cursor->job_id = *id;
        if (req.has_param("rank")) {
          auto rank = QueryInt(req, "rank", 0);
          if (!rank.ok()) return RespondError(res, rank.status());
          cursor->one_rank = true;
          cursor->rank = static_cast<int>(*rank);
        }
        if (req.has_param("attempt")) {
          auto attempt = QueryInt(req, "attempt", 0);
          if (!attempt.ok()) return RespondError(res, attempt.status());
          if (*attempt < 0 || *attempt > 1'000'000) {
            return RespondError(res, common::InvalidArgument("attempt out of range", "attempt"));
          }
          cursor->attempt = static_cast<int>(*attempt);
        }
        const bool follow = req.get_param_value("follow") == "1";
        bool terminal = false;
        if (!follow) {
          // The whole log, streamed a bounded chunk per rank at a time, never held whole. Access
          // is checked before the answer starts, so errors are still proper JSON answers. Only
          // the last read flushes partial lines, so a line across a chunk boundary stays one.
          auto first = cursor->Next(jobs, &terminal, false);
          if (!first.ok()) return RespondError(res, first.status());
          // Reads until one comes back empty, then in final mode (partial last lines flushed)
          // until one does again.
          struct Whole {
            std::string pending;
            bool final = false;
          };
          auto whole = std::make_shared<Whole>(Whole{std::move(*first)});
          res.status = 200;
          res.set_chunked_content_provider(
              "text/plain", [cursor, whole, &jobs](size_t, httplib::DataSink& sink) {
                std::string text;
                text.swap(whole->pending);
                if (text.empty()) {
                  bool terminal = false;
                  auto next = cursor->Next(jobs, &terminal, whole->final);
                  if (!next.ok()) return false;
                  text = std::move(*next);
                }
                if (!text.empty()) return sink.write(text.data(), text.size());
                if (whole->final) {
                  sink.done();
                } else {
                  whole->final = true;
                }
                return true;
              });
          return;
        }
        // Check access before the stream starts, so errors are still proper JSON answers.
        auto first = jobs.Logs(ctx.principal, *id, cursor->attempt);
        if (!first.ok()) return RespondError(res, first.status());
        cursor->attempt = first->attempt;
        res.status = 200;
        res.set_chunked_content_provider(
            "text/plain", [cursor, &jobs, &stopping](size_t, httplib::DataSink& sink) {
              int quiet = 0;  // reads in a row that found nothing new
              while (!stopping.load()) {
                if (!sink.is_writable() || common::http::GatedServer::ClientGone()) return false;
                bool terminal = false;
                auto text = cursor->Next(jobs, &terminal, false);
                if (!text.ok()) return false;
                if (!text->empty()) {
                  return sink.write(text->data(), text->size());
                }
                // The job's last bytes arrive with (or before) its exit report, so once it is
                // terminal and nothing new was read, the log is complete but for a last line
                // without its newline, flushed now.
                if (terminal) {
                  auto rest = cursor->Next(jobs, &terminal, true);
                  if (rest.ok() && !rest->empty() && !sink.write(rest->data(), rest->size())) {
                    return false;
                  }
                  break;
                }
                quiet = std::min(quiet + 1, kFollowIdlePolls);
                for (int i = 0; i < quiet && !stopping.load(); ++i) {
                  if (common::http::GatedServer::ClientGone()) return false;
                  std::this_thread::sleep_for(kFollowPoll);
                }
              }
              sink.done();
              return true;
            });
      });
}

}  // namespace controlplane::http
