#include "agent/rsh/rsh_protocol.h"

#include <CLI/CLI.hpp>

#include <set>

namespace agent {
namespace {

using common::InvalidArgument;

// One word of the daemon command as a shell would split it, or a `;` between statements.
struct Token {
  std::string text;
  bool separator = false;   // an unquoted ';'
  bool has_dollar = false;  // an unquoted '$' (an expansion the bridge does not do)
};

// Splits like sh: whitespace separates words; '...' is literal; "..." is literal but for \" \\
// \$ \`; a backslash outside quotes escapes the next character. Unquoted operators other than
// ';' are refused: the bridge runs one program, never a pipeline or a redirection.
common::Result<std::vector<Token>> ShellWords(const std::string& line) {
  std::vector<Token> out;
  Token cur;
  bool in_word = false;
  auto end_word = [&] {
    if (in_word) out.push_back(std::move(cur));
    cur = Token{};
    in_word = false;
  };
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      end_word();
    } else if (c == ';') {
      end_word();
      out.push_back({";", true, false});
    } else if (c == '\'') {
      size_t close = line.find('\'', i + 1);
      if (close == std::string::npos) return InvalidArgument("unterminated ' in the daemon command");
      cur.text += line.substr(i + 1, close - i - 1);
      in_word = true;
      i = close;
    } else if (c == '"') {
      in_word = true;
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() && std::string("\"\\$`").find(line[j + 1]) !=
                                                          std::string::npos) {
          cur.text += line[++j];
        } else if (line[j] == '$' || line[j] == '`') {
          return InvalidArgument("an expansion inside quotes in the daemon command");
        } else {
          cur.text += line[j];
        }
      }
      if (j >= line.size()) return InvalidArgument("unterminated \" in the daemon command");
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= line.size()) return InvalidArgument("a trailing \\ in the daemon command");
      cur.text += line[++i];
      in_word = true;
    } else if (std::string("|&<>()`{}*?[]~#!").find(c) != std::string::npos) {
      return InvalidArgument(std::string("the daemon command holds the shell operator '") + c +
                             "'");
    } else {
      if (c == '$') cur.has_dollar = true;
      cur.text += c;
      in_word = true;
    }
  }
  end_word();
  return out;
}

bool IsEnvName(const std::string& s) {
  static const std::set<std::string> kNames = {"PATH", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"};
  return kNames.count(s) > 0;
}

// `NAME=value` or `export NAME` for the library and program paths Open MPI's --prefix sets: the
// node's agent sets its own, so these are accepted and dropped.
bool IsPrefixStatement(const std::vector<Token>& st) {
  if (st.size() == 1) {
    const std::string& w = st[0].text;
    size_t eq = w.find('=');
    return eq != std::string::npos && IsEnvName(w.substr(0, eq));
  }
  return st.size() == 2 && st[0].text == "export" && !st[0].has_dollar && IsEnvName(st[1].text);
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

common::Result<RshInvocation> ParseRshArgs(const std::vector<std::string>& args) {
  RshInvocation inv;
  CLI::App app("embody-agent rsh: Open MPI's remote launcher, through the node's agent",
               "embody-agent rsh");
  app.prefix_command();  // everything from HOST on is the remote command, options included
  app.add_option("--hosts", inv.hosts_file, "host address -> agent URL (JSON)")->required();
  app.add_option("--ca-file", inv.ca_file, "the CAs an https agent's certificate chains to");
  // What ssh-style launchers are commonly given; nothing here has a meaning for the bridge.
  bool ignored = false;
  app.add_flag("-x,-n,-T,-q", ignored, "ignored (ssh compatibility)");
  std::string user;
  app.add_option("-l", user, "ignored (ssh compatibility)");
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  std::vector<std::string> rest = app.remaining();
  if (rest.empty()) return InvalidArgument("no host");
  inv.host = rest[0];
  inv.words.assign(rest.begin() + 1, rest.end());
  if (inv.words.empty()) return InvalidArgument("no command for " + inv.host);
  return inv;
}

common::Result<DaemonCommand> ParseDaemonCommand(const std::vector<std::string>& words) {
  if (words.empty()) return InvalidArgument("empty daemon command");
  if (words.size() > kMaxDaemonWords) return InvalidArgument("too many words in the daemon command");
  std::string line;
  for (const std::string& w : words) {
    if (!line.empty()) line += ' ';
    line += w;
    if (line.size() > kMaxDaemonCommandBytes) {
      return InvalidArgument("daemon command longer than " +
                             std::to_string(kMaxDaemonCommandBytes) + " bytes");
    }
  }
  for (unsigned char c : line) {
    if (c < 0x20 || c == 0x7f) return InvalidArgument("a control character in the daemon command");
  }
  EMBODY_ASSIGN_OR_RETURN(tokens, ShellWords(line));
  // Statements between ';': all but the last must be path settings; the last is the daemon.
  std::vector<std::vector<Token>> statements(1);
  for (Token& t : tokens) {
    if (t.separator) {
      statements.emplace_back();
    } else {
      statements.back().push_back(std::move(t));
    }
  }
  if (statements.back().empty()) statements.pop_back();  // a trailing ';'
  if (statements.empty()) return InvalidArgument("empty daemon command");
  for (size_t i = 0; i + 1 < statements.size(); ++i) {
    if (!IsPrefixStatement(statements[i])) {
      return InvalidArgument("only PATH and library path settings may precede the daemon");
    }
  }
  const std::vector<Token>& daemon = statements.back();
  if (daemon.empty()) return InvalidArgument("no program in the daemon command");
  for (const Token& t : daemon) {
    if (t.has_dollar) return InvalidArgument("an expansion in the daemon command");
  }
  DaemonCommand cmd;
  cmd.program = Basename(daemon[0].text);
  if (cmd.program != "orted" && cmd.program != "prted") {
    return InvalidArgument("only Open MPI's daemon (orted, prted) may be started, not \"" +
                           daemon[0].text + "\"");
  }
  for (size_t i = 1; i < daemon.size(); ++i) cmd.args.push_back(daemon[i].text);
  return cmd;
}

std::vector<std::string> DaemonArgsForNode(const DaemonCommand& command,
                                           const std::string& ranks_dir) {
  std::vector<std::string> out;
  const std::vector<std::string>& a = command.args;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--daemonize" || a[i] == "-daemonize") continue;
    if ((a[i] == "-mca" || a[i] == "--mca") && i + 2 < a.size() &&
        a[i + 1] == "orte_output_filename") {
      out.push_back(a[i]);
      out.push_back(a[i + 1]);
      out.push_back(ranks_dir + ":nojobid,nocopy");
      i += 2;
      continue;
    }
    out.push_back(a[i]);
  }
  return out;
}

std::string EncodeFrame(FrameType type, const std::string& payload) {
  std::string out;
  out.reserve(5 + payload.size());
  out += static_cast<char>(type);
  const uint32_t n = static_cast<uint32_t>(payload.size());
  out += static_cast<char>((n >> 24) & 0xff);
  out += static_cast<char>((n >> 16) & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  out += static_cast<char>(n & 0xff);
  out += payload;
  return out;
}

void FrameDecoder::Feed(const char* data, size_t n) {
  if (pos_ > 0) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(data, n);
}

common::Result<std::optional<Frame>> FrameDecoder::Next() {
  if (buffer_.size() - pos_ < 5) return std::optional<Frame>();
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + pos_);
  if (p[0] != 'o' && p[0] != 'k' && p[0] != 'x') {
    return InvalidArgument("not an rsh stream: frame type " + std::to_string(p[0]));
  }
  const uint32_t n = (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | p[4];
  if (n > kMaxFramePayload) return InvalidArgument("rsh frame of " + std::to_string(n) + " bytes");
  if (buffer_.size() - pos_ - 5 < n) return std::optional<Frame>();
  Frame f;
  f.type = static_cast<FrameType>(p[0]);
  f.payload = buffer_.substr(pos_ + 5, n);
  pos_ += 5 + n;
  return std::optional<Frame>(std::move(f));
}

}  // namespace agent
