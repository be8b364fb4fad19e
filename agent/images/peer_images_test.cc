#include "agent/images/peer_images.h"

#include <atomic>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "common/http/status_http.h"

namespace agent {
namespace {

using namespace std::chrono_literals;

// One node's agent as the head sees it: GET /v1/local/jobs/7/image answers the scripted replies
// in turn (the last one from then on) to the job's token, 401 to anything else.
class FakeNode {
 public:
  struct Reply {
    int status;
    std::string body;
  };
  explicit FakeNode(std::vector<Reply> replies) : replies_(std::move(replies)) {
    server_.Get(
        "/v1/local/jobs/7/image", [this](const httplib::Request& req, httplib::Response& res) {
          if (req.get_header_value("Authorization") != "Bearer job-token") {
            res.status = 401;
            res.set_content(common::http::ErrorBodyText(common::Status(
                                common::Code::kUnauthenticated, "missing or wrong job token")),
                            "application/json");
            return;
          }
          const size_t n = asked_++;
          const Reply& r = replies_[std::min(n, replies_.size() - 1)];
          res.status = r.status;
          res.set_content(r.body, "application/json");
        });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~FakeNode() {
    server_.stop();
    thread_.join();
  }
  api::HostSlot Slot(const std::string& name) const {
    return {3, name, "127.0.0.1", 1, "http://127.0.0.1:" + std::to_string(port_)};
  }
  size_t asked() const { return asked_; }

 private:
  std::vector<Reply> replies_;
  std::atomic<size_t> asked_{0};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

const FakeNode::Reply kReady{200, R"({"ready": true})"};
const FakeNode::Reply kPreparing{200, R"({"ready": false})"};
const FakeNode::Reply kUnknown{404, common::http::ErrorBodyText(common::NotFound("no part"))};

PeerImageWait Wait(std::vector<api::HostSlot> nodes) {
  PeerImageWait w;
  w.nodes = std::move(nodes);
  w.job_id = 7;
  w.job_token = "job-token";
  w.image = "torch-env@2";
  w.poll = 10ms;
  w.unknown_grace = 2s;
  w.timeout = 10s;
  return w;
}

bool Never() { return false; }

TEST(PeerImagesTest, WaitsUntilEveryNodeHasTheImage) {
  // b unpacks a while; c learns of its part late (its heartbeat), then has it at once.
  FakeNode b({kPreparing, kPreparing, kPreparing, kReady});
  FakeNode c({kUnknown, kUnknown, kReady});
  EXPECT_TRUE(WaitForImageOnNodes(Wait({b.Slot("b"), c.Slot("c")}), Never).ok());
  EXPECT_EQ(b.asked(), 4u);  // not asked again once it said ready
  EXPECT_EQ(c.asked(), 3u);
}

TEST(PeerImagesTest, ANodeThatCannotPrepareItFailsTheWaitNamingTheNodeAndWhy) {
  FakeNode b({kReady});
  FakeNode c({kPreparing,
              {409, common::http::ErrorBodyText(common::FailedPrecondition(
                        "cannot prepare image torch-env@2: disk full"))}});
  common::Status st = WaitForImageOnNodes(Wait({b.Slot("node-b"), c.Slot("node-c")}), Never);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("node node-c"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("disk full"), std::string::npos) << st.message();
}

TEST(PeerImagesTest, ANodeThatNeverTakesItsPartOrIsUnreachableFailsAfterTheGrace) {
  FakeNode b({kUnknown});
  PeerImageWait w = Wait({b.Slot("node-b")});
  w.unknown_grace = 200ms;
  common::Status st = WaitForImageOnNodes(w, Never);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("node node-b"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("torch-env@2"), std::string::npos) << st.message();
  // Nobody listening at all: the same, after the grace.
  w.nodes = {{4, "node-d", "127.0.0.1", 1, "http://127.0.0.1:1"}};
  st = WaitForImageOnNodes(w, Never);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("node node-d"), std::string::npos) << st.message();
}

TEST(PeerImagesTest, AWrongTokenIsNotReadinessAndStopEndsTheWait) {
  FakeNode b({kReady});
  PeerImageWait w = Wait({b.Slot("node-b")});
  w.job_token = "another-job";
  w.unknown_grace = 200ms;
  EXPECT_EQ(WaitForImageOnNodes(w, Never).code(), common::Code::kFailedPrecondition);
  FakeNode c({kPreparing});
  std::atomic<int> polls{0};
  common::Status st = WaitForImageOnNodes(Wait({c.Slot("node-c")}), [&] { return ++polls >= 3; });
  EXPECT_EQ(st.code(), common::Code::kUnavailable);
  EXPECT_EQ(polls.load(), 3);
}

TEST(PeerImagesTest, ANodeStillPreparingAtTheTimeoutFailsTheWait) {
  FakeNode b({kPreparing});
  PeerImageWait w = Wait({b.Slot("node-b")});
  w.timeout = 200ms;
  common::Status st = WaitForImageOnNodes(w, Never);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("node node-b was still preparing image torch-env@2"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace agent
