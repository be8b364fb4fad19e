#include "agent/node/node_collector.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "agent/testing/test_util.h"

namespace agent {
namespace {

TEST(NodeCollectorTest, ParsesCpuTimes) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  auto t = ParseCpuTimes("cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 1 2 3 4\nintr 1\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->total, 100u + 5 + 50 + 800 + 20 + 3 + 2 + 10);  // guest is inside user
  EXPECT_EQ(t->busy, t->total - 800 - 20);
  EXPECT_FALSE(ParseCpuTimes("cpu0 1 2 3 4\n"));
  EXPECT_FALSE(ParseCpuTimes("cpu  1 2\n"));
}

TEST(NodeCollectorTest, UtilisationIsTheBusyShareOfTheDelta) {
  CpuTimes a{100, 1000}, b{400, 2000};
  EXPECT_DOUBLE_EQ(CpuUtilization(a, b), 0.3);
  EXPECT_DOUBLE_EQ(CpuUtilization(a, a), 0.0);
  EXPECT_DOUBLE_EQ(CpuUtilization(b, a), 0.0);  // counters never go back; no nonsense if they do
  EXPECT_DOUBLE_EQ(CpuUtilization({}, {50, 50}), 1.0);
}

TEST(NodeCollectorTest, ParsesMemoryUse) {
  auto m = ParseMemoryUse("MemTotal:  1000 kB\nMemFree:  100 kB\nMemAvailable:  400 kB\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->total_bytes, 1000 * 1024);
  EXPECT_EQ(m->used_bytes, 600 * 1024);
  // Without MemAvailable: free + buffers + cached.
  m = ParseMemoryUse("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->used_bytes, 600 * 1024);
  EXPECT_FALSE(ParseMemoryUse("MemFree: 1 kB\n"));
}

TEST(NodeCollectorTest, SumsUsageOverTheTreeOnly) {
  std::vector<ProcessEntry> table(3);
  table[0].id = {10, 1};
  table[0].utime = 100, table[0].stime = 50, table[0].cutime = 30, table[0].cstime = 20;
  table[0].rss_pages = 10;
  table[1].id = {11, 2};
  table[1].utime = 100;
  table[1].rss_pages = 5;
  table[2].id = {12, 3};  // not in the tree
  table[2].utime = 1000;
  table[2].rss_pages = 1000;
  // pid 11 with another start time is a recycled pid: not the tree's process any more.
  ProcessUsage u = SumUsage(table, {{10, 1}, {11, 2}, {13, 9}}, 100, 4096);
  EXPECT_DOUBLE_EQ(u.cpu_seconds, 3.0);
  EXPECT_EQ(u.resident_bytes, 15 * 4096);
  EXPECT_DOUBLE_EQ(SumUsage(table, {{11, 99}}, 100, 4096).cpu_seconds, 0.0);
}

// The value of `series` (name and labels) in an exposition text; -1 when absent.
double Value(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(NodeCollectorTest, ReportsNodeAndJobProcessSeries) {
  // A "job": a session leader whose child burns 0.4 s of CPU time (not wall time: the machine
  // may be busy), then both sleep.
  pid_t leader = ::fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {
    ::setsid();
    if (::fork() == 0) {
      volatile unsigned long x = 0;
      while (std::clock() < CLOCKS_PER_SEC * 4 / 10) x = x + 1;
      ::pause();
      ::_exit(0);
    }
    ::pause();
    ::_exit(0);
  }
  NodeCollector node;
  JobProcessCollector jobs([leader] { return std::vector<JobRoot>{{42, "acme", leader}}; });

  std::string text;
  double cpu = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const std::string kJob = R"({job="42",tenant="acme"})";
  while (std::chrono::steady_clock::now() < deadline) {
    text = prometheus::TextSerializer().Serialize(jobs.Collect());
    cpu = Value(text, "embody_job_process_cpu_seconds_total" + kJob);
    if (cpu >= 0.3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(-leader, SIGKILL);
  ::waitpid(leader, nullptr, 0);

  EXPECT_GE(cpu, 0.3) << text;
  EXPECT_LT(cpu, 5.0) << text;
  EXPECT_TRUE(Has(text, "# TYPE embody_job_process_cpu_seconds_total counter"));
  // Two processes of a forked test binary: at least a few hundred kB resident.
  EXPECT_GT(Value(text, "embody_job_process_resident_memory_bytes" + kJob), 100e3) << text;
  EXPECT_FALSE(Has(text, "embody_node_")) << text;
  // The node's series name no job: they are what anyone may scrape (agent_metrics.h).
  text = prometheus::TextSerializer().Serialize(node.Collect());
  EXPECT_FALSE(Has(text, "job=")) << text;
  EXPECT_FALSE(Has(text, "acme")) << text;
  double ratio = Value(text, "embody_node_cpu_utilization_ratio");
  EXPECT_GE(ratio, 0.0) << text;
  EXPECT_LE(ratio, 1.0);
  double total = Value(text, "embody_node_memory_total_bytes");
  double used = Value(text, "embody_node_memory_used_bytes");
  EXPECT_GT(total, 0) << text;
  EXPECT_GT(used, 0);
  EXPECT_LT(used, total);
}

TEST(NodeCollectorTest, NoJobsNoJobSeries) {
  JobProcessCollector collector([] { return std::vector<JobRoot>{}; });
  EXPECT_TRUE(collector.Collect().empty());
}

}  // namespace
}  // namespace agent
