// The node's share of a launch: one place for the directories and the kill grace that the job
// runner and the rsh bridge both use.
#include "agent/jobs/job_sandbox_options.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace agent {
namespace {

TEST(JobSandboxOptionsTest, DirectoriesAreOnePerJobUnderTheDataDir) {
  JobSandboxOptions o;
  o.data_dir = "/var/lib/embody";
  EXPECT_EQ(o.JobDir(7), "/var/lib/embody/jobs/job-7");
  EXPECT_EQ(o.LogDir(7), "/var/lib/embody/logs/job-7");
  EXPECT_EQ(o.CheckpointDir(7), "/var/lib/embody/checkpoints/job-7");
  EXPECT_EQ(o.DownloadDir(7), "/var/lib/embody/downloads/job-7");
}

TEST(JobSandboxOptionsTest, LaunchInputCarriesTheNodesSettings) {
  JobSandboxOptions o;
  o.data_dir = "/d";
  o.address = "10.0.0.5";
  o.mpirun = "/opt/openmpi/bin/mpirun";
  o.engine = "/opt/embody/bin/embody-engine";
  o.rank_exec = "/opt/embody/bin/embody-agent";
  o.ca_file = "/d/bin/ca.pem";
  o.mpi_settings = {{"OMPI_MCA_btl", "self,tcp"}};
  o.sandbox.path = "/usr/bin:/bin";
  o.sandbox.switch_uid = true;
  o.kill_grace = std::chrono::milliseconds(2500);
  LaunchInput in = o.LaunchInputFor(12);
  EXPECT_EQ(in.job_id, 12);
  EXPECT_EQ(in.local_address, "10.0.0.5");
  EXPECT_EQ(in.job_dir, "/d/jobs/job-12");
  EXPECT_EQ(in.checkpoint_dir, "/d/checkpoints/job-12");
  EXPECT_EQ(in.mpirun, o.mpirun);
  EXPECT_EQ(in.engine, o.engine);
  EXPECT_EQ(in.rank_exec, o.rank_exec);
  EXPECT_EQ(in.ca_file, "/d/bin/ca.pem");
  EXPECT_EQ(in.path, "/usr/bin:/bin");
  EXPECT_EQ(in.mpi_settings, o.mpi_settings);
  EXPECT_FALSE(in.as_root) << "jobs that switch uid never run as root";
  EXPECT_EQ(in.kill_grace_s, 3) << "whole seconds, rounded up";
  o.kill_grace = std::chrono::milliseconds(0);
  EXPECT_EQ(o.LaunchInputFor(12).kill_grace_s, 1) << "a job always gets a second to end";
  o.sandbox.switch_uid = false;
  EXPECT_EQ(o.LaunchInputFor(12).as_root, ::geteuid() == 0);
}

}  // namespace
}  // namespace agent
