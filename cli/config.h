// Where the CLI finds the server, its token and the CA file an https server is verified with:
// EMBODY_URL / EMBODY_TOKEN / EMBODY_CA_FILE in the environment win;
// otherwise the sourceable env file that deploy/quickstart.sh writes ($EMBODY_HOME/env, or
// .embody/env in the current directory or any parent).
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace cli {

struct Config {
  std::string url;
  std::string token;
  std::string source;  // where the values came from, for error messages
  std::string ca_file;  // https: the CAs the server's certificate must chain to; "": the system's
};

// Parses `KEY=value` and `export KEY=value` lines; values may be single- or double-quoted.
std::map<std::string, std::string> ParseEnvFile(const std::string& text);
common::Result<Config> LoadConfig();

}  // namespace cli
