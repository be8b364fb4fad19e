// The simulator's view of every job it submitted: when the POST returned, when a simulated agent
// received its launch, and when the server acknowledged its end. Filled by the submitters and by
// the agents (JobObserver); read for the totals (time to place all jobs, to finish them, and the
// submit-to-launch wait of each). Thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "bench/agent_sim/sim_agent.h"

namespace bench {

class JobTracker : public JobObserver {
 public:
  void Submitted(int64_t job_id, double now);
  void Launched(int64_t job_id, double now) override;
  void Finished(int64_t job_id, int exit_code, double now) override;

  struct Totals {
    int64_t submitted = 0;
    int64_t launched = 0;          // distinct jobs launched at least once
    int64_t launches = 0;          // launch commands taken (restarts count again)
    int64_t finished = 0;          // distinct jobs whose end was acknowledged
    int64_t finished_nonzero = 0;  // of those, ended with a code other than 0
    double first_submit = std::numeric_limits<double>::infinity();
    double last_launch = 0;
    double last_finish = 0;
    std::vector<double> submit_to_launch_s;  // per job with both times
  };
  Totals Get() const;
  int64_t finished() const;

 private:
  struct Times {
    double submitted = -1;
    double launched = -1;  // first launch
    double finished = -1;
    int exit_code = 0;
  };
  mutable std::mutex mu_;
  std::unordered_map<int64_t, Times> jobs_;
  int64_t launches_ = 0;
  int64_t finished_ = 0;
};

}  // namespace bench
