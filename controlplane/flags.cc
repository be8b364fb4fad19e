#include "controlplane/flags.h"

#include <filesystem>
#include <functional>
#include <map>

namespace controlplane {

namespace {

common::Result<int> ParseInt(const std::string& flag, const std::string& v, int lo, int hi) {
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used == v.size() && n >= lo && n <= hi) return static_cast<int>(n);
  } catch (const std::exception&) {
  }
  return common::InvalidArgument("expects an integer in " + std::to_string(lo) + ".." +
                                     std::to_string(hi) + ", got '" + v + "'",
                                 flag);
}

}  // namespace

std::string DefaultWebDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto installed = exe.parent_path().parent_path() / "share" / "embody" / "web";
    if (std::filesystem::exists(installed / "index.html", ec)) return installed.string();
  }
  return EMBODY_BUILD_WEB_DIR;
}

std::string ServerUsage() {
  return "usage: embody-server --listen HOST:PORT --db CONNINFO --data-dir DIR\n"
         "           [--port-file FILE] [--bootstrap-out FILE] [--heartbeat-interval-ms 1000]\n"
         "           [--max-nodes-per-job 64] [--max-ranks-per-job 1024]\n"
         "           [--rate-limit-per-s 0] [--rate-limit-burst 0]   (per token; 0: none)\n"
         "           [--audit 1]   (0: no audit rows; for measuring what they cost)\n"
         "           [--web-dir DIR]   (the dashboard's files; default: " +
         DefaultWebDir() + ")\n"
         "           [--preempt-min-priority -1]   (jobs at this priority or above may preempt\n"
         "            lower ones; -1: no preemption) [--preempt-grace-ms 30000]\n"
         "           [--fair-share-half-life-s 86400] [--max-reservations 16]\n"
         "           [--checkpoint-max-mib 16384] [--checkpoint-max-per-job 64]\n"
         "           [--checkpoint-quota-gib 256]   (per tenant: checkpoint bytes uploading or\n"
         "            stored) [--checkpoint-upload-ttl-s 3600]   (an untouched upload is swept)\n"
         "           [--advertise HOST:PORT]   (what Prometheus service discovery lists for this\n"
         "            server; default: the --listen address, or the discovery request's Host\n"
         "            header when listening on all interfaces)\n";
}

common::Result<ServerOptions> ParseServerFlags(const std::vector<std::string>& args) {
  ServerOptions o;
  bool have_listen = false;
  using Setter = std::function<common::Status(const std::string& flag, const std::string& v)>;
  auto int_flag = [](int* dst, int lo, int hi) -> Setter {
    return [dst, lo, hi](const std::string& flag, const std::string& v) {
      auto n = ParseInt(flag, v, lo, hi);
      if (!n.ok()) return n.status();
      *dst = *n;
      return common::Status::Ok();
    };
  };
  auto str_flag = [](std::string* dst) -> Setter {
    return [dst](const std::string&, const std::string& v) {
      *dst = v;
      return common::Status::Ok();
    };
  };
  std::map<std::string, Setter> flags = {
      {"--listen",
       [&](const std::string& flag, const std::string& v) {
         size_t colon = v.rfind(':');
         if (colon == std::string::npos || colon == 0) {
           return common::InvalidArgument("expects HOST:PORT", flag);
         }
         auto port = ParseInt(flag, v.substr(colon + 1), 0, 65535);
         if (!port.ok()) return port.status();
         o.listen_host = v.substr(0, colon);
         o.listen_port = *port;
         have_listen = true;
         return common::Status::Ok();
       }},
      {"--advertise",
       [&](const std::string& flag, const std::string& v) {
         size_t colon = v.rfind(':');
         if (colon == std::string::npos || colon == 0 ||
             !ParseInt(flag, v.substr(colon + 1), 1, 65535).ok()) {
           return common::InvalidArgument("expects HOST:PORT", flag);
         }
         o.advertise = v;
         return common::Status::Ok();
       }},
      {"--db", str_flag(&o.db)},
      {"--data-dir", str_flag(&o.data_dir)},
      {"--web-dir", str_flag(&o.web_dir)},
      {"--port-file", str_flag(&o.port_file)},
      {"--bootstrap-out", str_flag(&o.bootstrap_out)},
      {"--heartbeat-interval-ms", int_flag(&o.heartbeat_interval_ms, 50, 600000)},
      {"--max-nodes-per-job", int_flag(&o.limits.max_nodes, 1, 100000)},
      {"--max-ranks-per-job", int_flag(&o.limits.max_ranks, 1, 10000000)},
      {"--scheduler-period-ms", int_flag(&o.scheduler_period_ms, 10, 600000)},
      {"--db-pool-size", int_flag(&o.db_pool_size, 1, 1000)},
      {"--rate-limit-per-s", int_flag(&o.rate_limit_per_s, 0, 1000000)},
      {"--rate-limit-burst", int_flag(&o.rate_limit_burst, 0, 1000000)},
      {"--preempt-min-priority", int_flag(&o.preempt_min_priority, -1, 100)},
      {"--preempt-grace-ms", int_flag(&o.preempt_grace_ms, 0, 3600 * 1000)},
      {"--fair-share-half-life-s", int_flag(&o.fair_share_half_life_s, 0, 365 * 86400)},
      {"--max-reservations", int_flag(&o.max_reservations, 0, 10000)},
      {"--checkpoint-max-mib", int_flag(&o.checkpoint_max_mib, 1, 1 << 20)},
      {"--checkpoint-quota-gib", int_flag(&o.checkpoint_quota_gib, 0, 1 << 20)},
      {"--checkpoint-max-per-job", int_flag(&o.checkpoint_max_per_job, 1, 10000)},
      {"--checkpoint-upload-ttl-s", int_flag(&o.checkpoint_upload_ttl_s, 10, 30 * 86400)},
      {"--audit",
       [&](const std::string& flag, const std::string& v) {
         auto n = ParseInt(flag, v, 0, 1);
         if (!n.ok()) return n.status();
         o.audit = *n == 1;
         return common::Status::Ok();
       }},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return common::InvalidArgument("needs a value", flag);
    }
    auto it = flags.find(flag);
    if (it == flags.end()) return common::InvalidArgument("unknown flag", flag);
    EMBODY_RETURN_IF_ERROR(it->second(flag, value));
  }
  if (!have_listen) return common::InvalidArgument("is required", "--listen");
  if (o.db.empty()) return common::InvalidArgument("is required", "--db");
  if (o.data_dir.empty()) return common::InvalidArgument("is required", "--data-dir");
  return o;
}

}  // namespace controlplane
