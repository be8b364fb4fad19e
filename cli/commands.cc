#include "cli/commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <thread>
#include <type_traits>

#include "cli/api_client.h"
#include "cli/command_line.h"
#include "cli/format.h"
#include "cli/forecast_format.h"
#include "cli/job_format.h"
#include "cli/pipeline_format.h"
#include "cli/plan_format.h"
#include "cli/requests.h"
#include "cli/dataset_format.h"
#include "cli/dataset_export.h"
#include "cli/dataset_upload.h"
#include "cli/tenancy_format.h"
#include "common/file_util.h"

namespace cli {
namespace {

using nlohmann::json;

constexpr int kMaxAuditPage = 500;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Commands {
 public:
  Commands(Io& io, ApiClient& api, const Invocation& inv) : io_(io), api_(api), inv_(inv) {}

  int Run() {
    const std::string& c = inv_.command;
    const std::string id = std::to_string(inv_.id);
    if (c == "ls") return PrintView(api_.Get(JobsPath(inv_)), api::v1::ParseJobList, JobsTable);
    if (c == "submit") return Submit();
    if (c == "plan") return Plan();
    if (c == "show") return PrintView(api_.Get("/v1/jobs/" + id), api::v1::ParseJob, JobDetail);
    if (c == "watch") return Watch(id);
    if (c == "cancel") {
      return PrintView(api_.Post("/v1/jobs/" + id + "/cancel", "{}"), api::v1::ParseJob,
                       [](const api::v1::Job& j) {
                         return std::to_string(j.id) + " " + j.state + "\n";
                       });
    }
    if (c == "logs") return Logs(id);
    if (c == "events") return Events(id);
    if (c == "metrics") return Metrics(id);
    if (c == "eval") {
      return PrintView(api_.Get("/v1/jobs/" + id + "/evaluation"), api::v1::ParseEvaluation,
                       EvaluationTable);
    }
    if (c == "nodes") return PrintView(api_.Get("/v1/nodes"), api::v1::ParseNodeList, NodesTable);
    if (c == "nodes drain" || c == "nodes undrain") {
      const bool drain = c == "nodes drain";
      return PrintView(
          api_.Post("/v1/nodes/" + id + (drain ? "/drain" : "/undrain"), "{}"),
          api::v1::ParseNode, [drain](const api::v1::Node& n) {
            return "node " + std::to_string(n.id) + " (" + n.name + ") " +
                   (drain ? "draining: no new jobs are placed on it\n" : "back in service\n");
          });
    }
    if (c == "nodes reset") {
      return PrintView(api_.Post("/v1/nodes/" + id + "/reset", "{}"), api::v1::ParseNode,
                       [](const api::v1::Node& n) {
                         return "node " + std::to_string(n.id) + " (" + n.name +
                                ") reset: its credential is revoked; the join token may "
                                "register it again\n";
                       });
    }
    if (c == "tenants") {
      return PrintView(api_.Get("/v1/tenants"), api::v1::ParseTenantList, TenantsTable);
    }
    if (c == "tenants create") {
      return PrintView(api_.Post("/v1/tenants", TenantBody(inv_).dump()), api::v1::ParseTenant,
                       TenantDetail);
    }
    if (c == "tenants show") {
      return PrintView(api_.Get("/v1/tenants/" + id), api::v1::ParseTenant, TenantDetail);
    }
    if (c == "tenants set") return SetTenant(id);
    if (c == "tokens create") return CreateToken();
    if (c == "tokens ls") {
      std::string path = "/v1/tokens";
      if (inv_.tenant) path += "?tenant_id=" + std::to_string(*inv_.tenant);
      return PrintView(api_.Get(path), api::v1::ParseTokenList,
                       [](const api::v1::TokenList& l) { return TokensTable(l, NowMs()); });
    }
    if (c == "tokens revoke") {
      auto r = api_.Send("DELETE", "/v1/tokens/" + id);
      if (!r.ok()) return Fail(r.status());
      return PrintView(r->body, api::v1::ParseToken, [](const api::v1::Token& t) {
        return "revoked token " + std::to_string(t.id) + " (" + t.name + ")\n";
      });
    }
    if (c == "datasets ls") {
      return PrintView(api_.Get("/v1/datasets?limit=" + std::to_string(inv_.limit)),
                       api::v1::ParseDatasetList, DatasetsTable);
    }
    if (c == "datasets show") {
      return PrintView(api_.Get("/v1/datasets/" + id), api::v1::ParseDatasetDetail, DatasetDetail);
    }
    if (c == "pipelines submit") {
      std::string body;
      if (inv_.file == "-") {
        body.assign(std::istreambuf_iterator<char>(io_.in), std::istreambuf_iterator<char>());
      } else {
        auto text = common::ReadFile(inv_.file);
        if (!text.ok()) return Fail(text.status());
        body = *text;
      }
      if (inv_.dry_run) {
        return PrintView(api_.Post("/v1/pipelines?dry_run=true", body),
                         api::v1::ParsePipelineDryRun, PipelineDryRunText);
      }
      return Print(api_.Post("/v1/pipelines", body),
                   [](const json& p) { return Cell(p, "id") + "\n"; });
    }
    if (c == "pipelines ls") {
      return PrintView(api_.Get("/v1/pipelines?limit=" + std::to_string(inv_.limit)),
                       api::v1::ParsePipelineList, PipelinesTable);
    }
    if (c == "pipelines show") {
      return PrintView(api_.Get("/v1/pipelines/" + id), api::v1::ParsePipeline, PipelineDetail);
    }
    if (c == "pipelines cancel") {
      return PrintView(api_.Post("/v1/pipelines/" + id + "/cancel", ""), api::v1::ParsePipeline,
                       PipelineDetail);
    }
    if (c == "datasets import") {
      const DatasetImportFlags flags{inv_.format, inv_.filter, inv_.language, inv_.nan,
                                     inv_.resize};
      return PrintView(
          api_.Post("/v1/datasets", DatasetImportBody(inv_.name, inv_.path, flags).dump()),
          api::v1::ParseDataset,
          [](const api::v1::Dataset& d) { return DatasetQueuedLine(d, "importing"); });
    }
    if (c == "datasets pull") {
      return PrintView(api_.Post("/v1/datasets", DatasetPullBody(inv_.name, inv_.path).dump()),
                       api::v1::ParseDataset,
                       [](const api::v1::Dataset& d) { return DatasetQueuedLine(d, "pulling"); });
    }
    if (c == "datasets upload") return UploadDataset(inv_, api_, io_.out, io_.err);
    if (c == "datasets export") return ExportDataset(inv_, api_, io_.out, io_.err);
    if (c == "datasets rm") {
      auto r = api_.Send("DELETE", "/v1/datasets/" + id);
      if (!r.ok()) return Fail(r.status());
      return PrintView(r->body, api::v1::ParseDataset, [](const api::v1::Dataset& d) {
        return "deleted dataset " + std::to_string(d.id) + " (" + d.name + " version " +
               std::to_string(d.version) + ")\n";
      });
    }
    if (c == "whoami") return PrintView(api_.Get("/v1/whoami"), api::v1::ParseWhoAmI, WhoAmIText);
    if (c == "usage") return Usage();
    if (c == "audit") return Audit();
    io_.err << "embody: command \"" << c << "\" is not implemented\n";
    return kExitUsage;
  }

 private:
  int Usage() {
    int64_t tenant = inv_.tenant.value_or(0);
    if (tenant == 0) {
      auto me = api_.Get("/v1/whoami");
      if (!me.ok()) return Fail(me.status());
      tenant = me->value("tenant_id", int64_t{0});
    }
    std::string path = "/v1/tenants/" + std::to_string(tenant) + "/usage";
    std::string sep = "?";
    if (!inv_.from.empty()) path += sep + "from=" + inv_.from, sep = "&";
    if (!inv_.to.empty()) path += sep + "to=" + inv_.to;
    return PrintView(api_.Get(path), api::v1::ParseTenantUsage, UsageTable);
  }

  int Fail(const common::Status& s) {
    io_.err << "embody: " << RefusalText(s) << "\n";
    return kExitRefused;
  }

  // The server's JSON with --output json, else `table` of it.
  int Print(const common::Result<json>& r, const std::function<std::string(const json&)>& table) {
    if (!r.ok()) return Fail(r.status());
    if (inv_.json) {
      io_.out << r->dump() << "\n";
    } else {
      io_.out << table(*r);
    }
    return 0;
  }

  // A reply the view's codec refuses: the server speaks another version of the API.
  static common::Status NotUnderstood(const common::Status& s) {
    return common::Status(common::Code::kInternal,
                          "the server's reply does not match this client's API: " + s.message(),
                          s.field());
  }

  // Like Print, with the table of the view `parse` reads from the server's JSON (api/v1/): a
  // reply the codec refuses is an error naming the field, never a table of guesses.
  template <typename View>
  int PrintView(const common::Result<json>& r, common::Result<View> (*parse)(const json&),
                const std::type_identity_t<std::function<std::string(const View&)>>& table) {
    if (!r.ok()) return Fail(r.status());
    if (inv_.json) {
      io_.out << r->dump() << "\n";
      return 0;
    }
    auto view = parse(*r);
    if (!view.ok()) return Fail(NotUnderstood(view.status()));
    io_.out << table(*view);
    return 0;
  }

  int Submit() {
    std::string body;
    if (inv_.file == "-") {
      body.assign(std::istreambuf_iterator<char>(io_.in), std::istreambuf_iterator<char>());
    } else {
      auto text = common::ReadFile(inv_.file);
      if (!text.ok()) return Fail(text.status());
      body = *text;
    }
    if (inv_.dry_run) {
      auto f = api_.Post("/v1/jobs?dry_run=true", body);
      if (!f.ok()) return Fail(f.status());
      if (inv_.json) {
        io_.out << f->dump(2) << "\n" << std::flush;
        return 0;
      }
      auto view = api::v1::ParseForecast(*f);
      if (!view.ok()) return Fail(NotUnderstood(view.status()));
      io_.out << ForecastText(*view) << std::flush;
      return 0;
    }
    auto r = api_.Post("/v1/jobs", body);
    if (!r.ok()) return Fail(r.status());
    auto job = api::v1::ParseJob(*r);
    if (!job.ok()) return Fail(NotUnderstood(job.status()));
    const std::string id = std::to_string(job->id);
    io_.out << id << "\n" << std::flush;
    return inv_.watch ? Watch(id) : 0;
  }

  int Plan() {
    auto read = [this](const std::string& path) -> common::Result<json> {
      std::string text;
      if (path == "-") {
        text.assign(std::istreambuf_iterator<char>(io_.in), std::istreambuf_iterator<char>());
      } else {
        EMBODY_ASSIGN_OR_RETURN(t, common::ReadFile(path));
        text = std::move(t);
      }
      json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return common::InvalidArgument(path + " is not valid JSON");
      return j;
    };
    std::vector<int> gpus;
    if (!inv_.gpus.empty()) {
      auto g = ParseGpuList(inv_.gpus);
      if (!g.ok()) return Fail(g.status());
      gpus = *g;
    }
    auto file = read(inv_.file);
    if (!file.ok()) return Fail(file.status());
    json cluster;
    if (!inv_.cluster.empty()) {
      auto c = read(inv_.cluster);
      if (!c.ok()) return Fail(c.status());
      cluster = *c;
    }
    auto body = PlanBody(*file, gpus, cluster);
    if (!body.ok()) return Fail(body.status());
    return PrintView(api_.Post("/v1/plan", body->dump()), api::v1::ParsePlan, PlanTable);
  }

  int Watch(const std::string& id) {
    std::string last_line;
    auto last_print = std::chrono::steady_clock::now() - std::chrono::hours(1);
    int failures = 0;
    for (;;) {
      auto r = api_.Get("/v1/jobs/" + id);
      if (!r.ok()) {
        if (r.status().code() == common::Code::kUnavailable && ++failures < 20) {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          continue;
        }
        return Fail(r.status());
      }
      failures = 0;
      auto parsed = api::v1::ParseJob(*r);
      if (!parsed.ok()) return Fail(NotUnderstood(parsed.status()));
      const api::v1::Job& job = *parsed;
      const std::string line = ProgressLine(job);
      const std::string& state = job.state;
      const bool done = state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
      const auto now = std::chrono::steady_clock::now();
      if (io_.tty) {
        io_.out << "\r\033[K" << line << std::flush;
      } else if (line != last_line && (done || now - last_print > std::chrono::seconds(2))) {
        io_.out << line << "\n" << std::flush;
        last_print = now;
      }
      last_line = line;
      if (done) return Finished(id, job, state);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  int Finished(const std::string& id, const api::v1::Job& job, const std::string& state) {
    if (io_.tty) io_.out << "\n";
    if (job.exit_code) io_.out << "exit code: " << *job.exit_code << "\n";
    if (job.latest_checkpoint) io_.out << "checkpoint: " << job.latest_checkpoint->path << "\n";
    // A training run ends by sampling actions on held-out demonstrations; an eval job by its
    // episodes' success rates.
    auto eval = api_.Get("/v1/jobs/" + id + "/events?type=eval&limit=1");
    if (eval.ok()) {
      auto events = api::v1::ParseEventList(*eval);
      if (events.ok() && !events->events.empty()) {
        io_.out << EvalEventLine(events->events[0].data);
      }
    }
    if (state != "SUCCEEDED") io_.out << "reason: " << job.reason << "\n";
    io_.out << std::flush;
    return state == "SUCCEEDED" ? 0 : 1;
  }

  int Events(const std::string& id) {
    std::string path = "/v1/jobs/" + id + "/events?limit=1000";
    if (!inv_.type.empty()) path += "&type=" + QueryValue(inv_.type);
    return PrintView(api_.Get(path), api::v1::ParseEventList, EventsText);
  }

  int Metrics(const std::string& id) {
    std::string path = "/v1/jobs/" + id + "/metrics?";
    if (!inv_.names.empty()) path += "names=" + QueryValue(inv_.names) + "&";
    if (!inv_.since.empty()) path += "since=" + QueryValue(inv_.since) + "&";
    if (inv_.max_points) path += "max_points=" + std::to_string(*inv_.max_points) + "&";
    return Print(api_.Get(path), MetricsTable);
  }

  int Logs(const std::string& id) {
    std::string path = "/v1/jobs/" + id + "/logs?";
    if (inv_.rank) path += "rank=" + std::to_string(*inv_.rank) + "&";
    if (inv_.attempt) path += "attempt=" + std::to_string(*inv_.attempt) + "&";
    if (inv_.follow) path += "follow=1";
    common::Status s = api_.Stream(path, [this](const char* d, size_t n) {
      io_.out.write(d, static_cast<std::streamsize>(n));
      io_.out.flush();
    });
    return s.ok() ? 0 : Fail(s);
  }

  // PATCH with If-Match: the version given, or the one a GET reads now. A change in between is
  // refused by the server (412) and reported, never overwritten.
  int SetTenant(const std::string& id) {
    const json body = TenantBody(inv_);
    if (body.empty()) {
      io_.err
          << "embody: tenants set: nothing to change (give --name, --weight or a --quota-* flag)\n";
      return kExitUsage;
    }
    std::string version;
    if (inv_.if_match) {
      version = "\"" + std::to_string(*inv_.if_match) + "\"";
    } else {
      auto current = api_.Send("GET", "/v1/tenants/" + id);
      if (!current.ok()) return Fail(current.status());
      version = current->etag;
      if (version.empty()) {
        io_.err << "embody: the server sent no version (ETag) for tenant " << id << "\n";
        return kExitRefused;
      }
    }
    auto r = api_.Send("PATCH", "/v1/tenants/" + id, body.dump(), {{"If-Match", version}});
    if (!r.ok()) return Fail(r.status());
    return PrintView(r->body, api::v1::ParseTenant, TenantDetail);
  }

  int CreateToken() {
    auto r = api_.Post("/v1/tokens", TokenBody(inv_).dump());
    if (!r.ok()) return Fail(r.status());
    int code = PrintView(*r, api::v1::ParseCreatedToken, TokenDetail);
    io_.err << "embody: this is the only time the token's secret is shown; store it now\n";
    return code;
  }

  // Newest first, --limit entries in all (pages of at most 500), or every entry with --all.
  int Audit() {
    api::v1::AuditPage all;
    for (;;) {
      int want = kMaxAuditPage;
      if (!inv_.all)
        want = std::min<int>(kMaxAuditPage, inv_.limit - static_cast<int>(all.entries.size()));
      auto reply = api_.Get(AuditPath(want, all.next_cursor.value_or("")));
      if (!reply.ok()) return Fail(reply.status());
      auto page = api::v1::ParseAuditPage(*reply);
      if (!page.ok()) return Fail(NotUnderstood(page.status()));
      for (api::v1::AuditEntry& e : page->entries) all.entries.push_back(std::move(e));
      all.next_cursor = page->next_cursor;
      if (!all.next_cursor) break;
      if (!inv_.all && static_cast<int>(all.entries.size()) >= inv_.limit) break;
    }
    if (inv_.json) {
      io_.out << api::v1::ToJson(all).dump() << "\n";
    } else {
      io_.out << AuditTable(all.entries);
    }
    return 0;
  }

  Io& io_;
  ApiClient& api_;
  const Invocation& inv_;
};

}  // namespace

int RunCli(const std::vector<std::string>& args, Io& io) {
  auto parsed = ParseCommandLine(args, io.out, io.err);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  const Invocation& inv = std::get<Invocation>(parsed);
  auto config = io.config();
  if (!config.ok()) {
    // Nothing was sent: where the server is, is the caller's to say.
    io.err << "embody: " << config.status().message() << "\n";
    return kExitUsage;
  }
  if (!inv.ca_file.empty()) config->ca_file = inv.ca_file;
  ApiClient api(*config);
  return Commands(io, api, inv).Run();
}

int RunCli(const std::vector<std::string>& args) {
  Io io{std::cout, std::cerr, std::cin, static_cast<bool>(::isatty(STDOUT_FILENO))};
  return RunCli(args, io);
}

}  // namespace cli
