// Datasets for the end-to-end suites: a robomimic-layout HDF5 file written where the stack's jobs
// can read it, imported through POST /v1/datasets. Header-only, for the suites that link
// storage's testing library (embody_storage_testing).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/testing/robomimic_file.h"
#include "tests/e2e/local_stack.h"

namespace embody_test {

// Writes `spec` to <stack dir>/inputs/NAME.hdf5 (the directory and file open to the jobs' uids),
// imports it as dataset NAME of the admin's tenant and waits up to 90 s for it. The version's
// JSON when it is ready; a gtest failure and an empty object otherwise.
inline nlohmann::json ImportRobomimicThroughApi(LocalStack& stack, const std::string& name,
                                                const storage::testing::RobomimicFileSpec& spec) {
  namespace fs = std::filesystem;
  const std::string inputs = stack.dir() + "/inputs";
  fs::create_directories(inputs);
  fs::permissions(inputs, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  const std::string path = inputs + "/" + name + ".hdf5";
  auto made = storage::testing::WriteRobomimicFile(path, spec);
  if (!made.ok()) {
    ADD_FAILURE() << made.status().ToString();
    return nlohmann::json::object();
  }
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read);
  HttpResult r = stack.Post(
      "/v1/datasets",
      nlohmann::json{{"name", name}, {"source", {{"format", "hdf5"}, {"path", path}}}}.dump());
  if (r.status != 201) {
    ADD_FAILURE() << r.text;
    return nlohmann::json::object();
  }
  const std::string at = "/v1/datasets/" + std::to_string(r.body["id"].get<int64_t>());
  nlohmann::json d = nlohmann::json::object();
  for (int i = 0; i < 900 && d.value("state", "importing") == "importing"; ++i) {
    d = stack.Get(at).body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (d.value("state", "") != "ready") {
    ADD_FAILURE() << d.dump(2);
    return nlohmann::json::object();
  }
  return d;
}

}  // namespace embody_test
