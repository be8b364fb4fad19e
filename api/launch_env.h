// The launch contract's environment: the variables the node agent sets for the processes of a
// job it starts (agent/launch/mpi_launch.cc writes them; docs/contracts.md, "What a job sees") and the
// programs it runs read (embody-engine once, in engine/jobs/job_context.h; embody-data in
// storage/import_reporter.cc). Names only: what each value means and the rule for an unset or
// empty one belong to the reader.
#pragma once

namespace api {

// http(s)://127.0.0.1:PORT of the node agent's job-local API, optionally with a path prefix.
inline constexpr char kEnvAgentUrl[] = "EMBODY_AGENT_URL";
// The job's id, in decimal.
inline constexpr char kEnvJobId[] = "EMBODY_JOB_ID";
// The bearer token of this launch for the job-local API.
inline constexpr char kEnvJobToken[] = "EMBODY_JOB_TOKEN";
// PEM CAs the agent's certificate chains to, when the agent serves TLS.
inline constexpr char kEnvCaFile[] = "EMBODY_CA_FILE";
// Where the job writes its checkpoints.
inline constexpr char kEnvCheckpointDir[] = "EMBODY_CHECKPOINT_DIR";
// A checkpoint file to continue from (a restart, an rl job's init_from, an eval job's policy);
// set only when there is one.
inline constexpr char kEnvResumeFrom[] = "EMBODY_RESUME_FROM";
// The address other nodes reach this node by.
inline constexpr char kEnvNodeAddress[] = "EMBODY_NODE_ADDRESS";
// The job's directory on this node, and where its ranks write their output files.
inline constexpr char kEnvJobDir[] = "EMBODY_JOB_DIR";
inline constexpr char kEnvRankLogDir[] = "EMBODY_RANK_LOG_DIR";
// A command job's datasets: the directories its spec names, the same on every node.
inline constexpr char kEnvDatasets[] = "EMBODY_DATASETS";

}  // namespace api
