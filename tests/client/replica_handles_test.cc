// Handles across replicas: three real tensord replicas behind one client
// target. A handle lives on the replica that made it (TensorHandle.replica),
// the client sends every call on it there and balances the others; a replica
// that is SIGTERMed while holding handles keeps serving calls on them until
// its grace period ends and turns every other call away (UNAVAILABLE, which
// clients retry on another replica).
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::StatusIs;
using ::tensorop::testing::TensordProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int kReplicas = 3;

std::string Floats(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// README's slice: float32 [1,1,4,4] holding 1..16.
HostTensor DocInput() {
  std::vector<float> values;
  for (int i = 1; i <= 16; ++i) values.push_back(static_cast<float>(i));
  return HostTensor{v1::FLOAT32, {1, 1, 4, 4}, {}, Floats(values)};
}

// Offsets [0,0,0,1], window [1,1,4,3], strides [1,1,2,2] of DocInput, read
// through `handle`: 2, 4, 10, 12.
v1::RunRequest DocSliceOf(const v1::TensorHandle& handle) {
  v1::RunRequest request;
  request.set_id("doc-slice");
  request.set_backend(v1::CPU);
  v1::SliceAttrs& slice = *request.mutable_slice();
  for (int64_t offset : {0, 0, 0, 1}) slice.add_offsets(offset);
  for (int64_t size : {1, 1, 4, 3}) slice.add_window_sizes(size);
  for (int64_t stride : {1, 1, 2, 2}) slice.add_window_strides(stride);
  ReferTo(handle, (*request.mutable_inputs())["input"]);
  v1::OutputDesc& output = *request.add_outputs();
  for (int64_t size : {1, 1, 2, 2}) output.add_sizes(size);
  return request;
}

const std::string& DocSliceAnswer() {
  static const std::string* const answer = new std::string(Floats({2, 4, 10, 12}));
  return *answer;
}

// `tensor` as a request's input carrying its bytes.
v1::Tensor WithData(const HostTensor& tensor) {
  v1::Tensor proto;
  proto.set_dtype(tensor.dtype);
  proto.mutable_sizes()->Assign(tensor.sizes.begin(), tensor.sizes.end());
  proto.set_data(tensor.data);
  return proto;
}

// scatter_elements of `updates` into `input` ([4] and [1], handles) at index
// 2, the indices sent with the request.
v1::RunRequest ScatterOf(const v1::TensorHandle& input, const v1::TensorHandle& updates) {
  v1::RunRequest request;
  request.set_id("scatter");
  request.set_backend(v1::CPU);
  request.mutable_scatter_elements()->set_axis(0);
  ReferTo(input, (*request.mutable_inputs())["input"]);
  (*request.mutable_inputs())["indices"] =
      WithData(HostTensor{v1::INT32, {1}, {}, std::string("\x02\0\0\0", 4)});
  ReferTo(updates, (*request.mutable_inputs())["updates"]);
  return request;
}

const HostTensor& Row() {
  static const HostTensor* const row = new HostTensor{v1::FLOAT32, {4}, {}, Floats({1, 2, 3, 4})};
  return *row;
}
const HostTensor& Update() {
  static const HostTensor* const update = new HostTensor{v1::FLOAT32, {1}, {}, Floats({-7})};
  return *update;
}

class ReplicaHandlesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> addresses;
    for (int i = 0; i < kReplicas; ++i) {
      // A long grace period, so that the draining test has time to look;
      // replicas without handles stop at once regardless.
      replicas_.push_back(std::make_unique<TensordProcess>(std::vector<std::string>{
          "--backends=cpu", "--shutdown_grace_seconds=20", "--drain_seconds=0"}));
      addresses.push_back(replicas_.back()->target());
    }
    target_ = absl::StrJoin(addresses, ",");
  }

  // Handles left would hold each replica for its grace period on the way out.
  void TearDown() override {
    for (const auto& replica : replicas_) {
      Client direct = Direct(*replica);
      absl::StatusOr<std::vector<v1::TensorHandle>> left = direct.ListAllHandles();
      if (left.ok() && !left->empty()) {
        EXPECT_TRUE(direct.Release(*left).ok());
      }
    }
  }

  static ClientOptions Options() {
    ClientOptions options;
    options.deadline = absl::Seconds(30);
    return options;
  }
  // One client for all replicas, as a user would make it.
  Client MakeClient() const { return Client(target_, Options()); }
  // A client of one replica alone, which reaches it while its health says
  // NOT_SERVING.
  static Client Direct(const TensordProcess& replica) {
    ClientOptions options = Options();
    options.skip_unhealthy_replicas = false;
    return Client(replica.target(), options);
  }

  // Puts DocInput until handles sit on every replica (round-robin spreads
  // them once the channel has connected to each one, which on a busy machine
  // takes longer than a few calls: past six handles it puts one every 20 ms),
  // for at most 20 s.
  std::vector<v1::TensorHandle> PutOnSeveralReplicas(Client& client) {
    std::vector<v1::TensorHandle> handles;
    std::set<std::string> holding;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((handles.size() < 6 || holding.size() < kReplicas) &&
           std::chrono::steady_clock::now() < give_up) {
      absl::StatusOr<v1::TensorHandle> handle = client.Put(DocInput());
      EXPECT_TRUE(handle.ok()) << handle.status();
      if (!handle.ok()) break;
      holding.insert(handle->replica());
      handles.push_back(*handle);
      if (handles.size() >= 6) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return handles;
  }

  // The replica holding `handle`.
  TensordProcess& Holder(const v1::TensorHandle& handle) {
    for (const auto& replica : replicas_) {
      if (replica->target() == handle.replica()) return *replica;
    }
    ADD_FAILURE() << "no replica is " << handle.replica();
    return *replicas_[0];
  }

  std::vector<std::unique_ptr<TensordProcess>> replicas_;
  std::string target_;  // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
};

TEST_F(ReplicaHandlesTest, HandlesNameTheirReplicaAndEveryCallOnThemGoesThere) {
  Client client = MakeClient();
  const std::vector<v1::TensorHandle> handles = PutOnSeveralReplicas(client);
  std::set<std::string> targets;
  for (const auto& replica : replicas_) targets.insert(replica->target());
  std::set<std::string> holding;
  for (const v1::TensorHandle& handle : handles) {
    EXPECT_TRUE(targets.contains(handle.replica())) << handle.replica();
    holding.insert(handle.replica());
  }
  EXPECT_GE(holding.size(), 2u) << "round-robin put every handle on one replica";

  // The other replicas do not have a handle (NOT_FOUND), so byte-exact
  // answers show each call went to its handle's replica.
  std::vector<v1::RunRequest> bidi;
  for (const v1::TensorHandle& handle : handles) {
    const v1::RunRequest request = DocSliceOf(handle);
    for (int style = 0; style < 4; ++style) {
      absl::StatusOr<Result> result = style == 0   ? client.Run(request)
                                      : style == 1 ? client.RunStream(request)
                                      : style == 2 ? client.RunChunked(request)
                                                   : client.RunChain(OneStepChain(request));
      ASSERT_TRUE(result.ok()) << style << " on " << handle.replica() << ": " << result.status();
      ASSERT_EQ(result->outputs.size(), 1u);
      EXPECT_EQ(result->outputs[0].data, DocSliceAnswer()) << style;
    }
    ASSERT_OK_AND_ASSIGN(const HostTensor fetched, client.Fetch(handle));
    EXPECT_EQ(fetched.data, DocInput().data);
    bidi.push_back(request);
    bidi.back().set_id(handle.id());
  }
  // One RunBidi call over handles of every replica: a stream to each.
  const std::vector<absl::StatusOr<Result>> answers = client.RunBidi(bidi);
  for (const absl::StatusOr<Result>& answer : answers) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->outputs[0].data, DocSliceAnswer());
  }

  // Released on their replicas: each is gone there.
  ASSERT_OK(client.Release(handles));
  for (const v1::TensorHandle& handle : handles) {
    EXPECT_THAT(client.Fetch(handle),
                StatusIs(absl::StatusCode::kNotFound,
                         HasSubstr(absl::StrCat("does not exist on replica ", handle.replica()))));
  }
}

TEST_F(ReplicaHandlesTest, ACallReadingHandlesOfTwoReplicasIsRefusedBeforeItIsSent) {
  Client client = MakeClient();
  const std::vector<v1::TensorHandle> handles = PutOnSeveralReplicas(client);
  const std::string& a = handles[0].replica();
  std::string b;
  for (const v1::TensorHandle& handle : handles) {
    if (handle.replica() != a) b = handle.replica();
  }
  ASSERT_FALSE(b.empty());
  // PutOptions::replica chooses where a tensor goes.
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle row, client.Put(Row(), {.replica = a}));
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle far, client.Put(Update(), {.replica = b}));
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle near, client.Put(Update(), {.replica = a}));
  EXPECT_EQ(row.replica(), a);
  EXPECT_EQ(far.replica(), b);
  EXPECT_EQ(near.replica(), a);

  const std::string message =
      absl::StrCat("inputs[\"input\"] lives on replica ", a, " and inputs[\"updates\"] on replica ",
                   b, "; a call reads handles of one replica");
  const v1::RunRequest mixed = ScatterOf(row, far);
  EXPECT_THAT(client.Run(mixed), StatusIs(absl::StatusCode::kInvalidArgument, message));
  EXPECT_THAT(client.RunStream(mixed), StatusIs(absl::StatusCode::kInvalidArgument, message));
  EXPECT_THAT(client.RunChunked(mixed), StatusIs(absl::StatusCode::kInvalidArgument, message));
  EXPECT_THAT(client.RunBidi({mixed})[0], StatusIs(absl::StatusCode::kInvalidArgument, message));
  EXPECT_THAT(client.RunChain(OneStepChain(mixed)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("steps[0].inputs[\"input\"] lives on replica ", a,
                                    " and steps[0].inputs[\"updates\"] on replica ", b,
                                    "; a call reads handles of one replica")));
  // Nothing reached a server: none logged a scatter.
  for (const auto& replica : replicas_) {
    EXPECT_THAT(replica->Log(), Not(HasSubstr("\"id\":\"scatter\""))) << replica->target();
  }

  // With the update beside the input, the call runs.
  ASSERT_OK_AND_ASSIGN(const Result result, client.Run(ScatterOf(row, near)));
  EXPECT_EQ(result.outputs[0].data, Floats({1, 2, -7, 4}));

  // RunWithHandles Puts every input on one replica, however round-robin
  // would spread them.
  v1::RunRequest scatter = ScatterOf(row, near);
  scatter.set_id("with-handles");
  (*scatter.mutable_inputs())["input"] = WithData(Row());
  (*scatter.mutable_inputs())["updates"] = WithData(Update());
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(const Result through, RunWithHandles(client, scatter));
    EXPECT_EQ(through.outputs[0].data, Floats({1, 2, -7, 4}));
  }
}

TEST_F(ReplicaHandlesTest, AReplicaWithoutTheHandleAnswersNotFound) {
  Client client = MakeClient();
  const std::vector<v1::TensorHandle> handles = PutOnSeveralReplicas(client);
  const v1::TensorHandle& held = handles[0];
  v1::TensorHandle elsewhere = held;
  for (const auto& replica : replicas_) {
    if (replica->target() != held.replica()) elsewhere.set_replica(replica->target());
  }
  const std::string message =
      absl::StrCat("handle ", held.id().substr(0, 8), "... does not exist on replica ",
                   elsewhere.replica(), " (released, expired, or never made here)");
  EXPECT_THAT(client.Run(DocSliceOf(elsewhere)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(message)));
  EXPECT_THAT(client.Fetch(elsewhere), StatusIs(absl::StatusCode::kNotFound, HasSubstr(message)));
  // Where it lives, it is whole.
  ASSERT_OK_AND_ASSIGN(const Result result, client.Run(DocSliceOf(held)));
  EXPECT_EQ(result.outputs[0].data, DocSliceAnswer());
}

TEST_F(ReplicaHandlesTest, ADrainingReplicaServesItsHandlesAndTurnsTheRestAway) {
  Client client = MakeClient();
  const std::vector<v1::TensorHandle> handles = PutOnSeveralReplicas(client);
  const v1::TensorHandle held = handles[0];
  TensordProcess& draining = Holder(held);
  Client direct = Direct(draining);
  v1::RunRequest plain = DocSliceOf(held);
  (*plain.mutable_inputs())["input"] = WithData(DocInput());

  ASSERT_EQ(kill(draining.pid(), SIGTERM), 0);
  const auto sigterm = std::chrono::steady_clock::now();
  const std::string refusal = absl::StrCat(
      "replica ", draining.target(),
      " is shutting down: it serves only calls on its handles until --shutdown_grace_seconds ends");
  // The drain starts as soon as tensord has taken the signal.
  absl::StatusOr<Result> turned_away = direct.Run(plain);
  for (int i = 0; i < 200 && turned_away.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    turned_away = direct.Run(plain);
  }
  EXPECT_THAT(turned_away, StatusIs(absl::StatusCode::kUnavailable, refusal));
  EXPECT_THAT(direct.Put(DocInput()), StatusIs(absl::StatusCode::kUnavailable, refusal));
  EXPECT_THAT(direct.RunChain(OneStepChain(plain)),
              StatusIs(absl::StatusCode::kUnavailable, refusal));
  // A tiny copy, which RunBidi runs on the thread that read it, too.
  const std::vector<absl::StatusOr<Result>> bidi = direct.RunBidi({plain});
  ASSERT_EQ(bidi.size(), 1u);
  EXPECT_THAT(bidi[0], StatusIs(absl::StatusCode::kUnavailable, refusal));

  // Its handles are still served, by every call on them.
  ASSERT_OK_AND_ASSIGN(const Result sliced, client.Run(DocSliceOf(held)));
  EXPECT_EQ(sliced.outputs[0].data, DocSliceAnswer());
  ASSERT_OK_AND_ASSIGN(const HostTensor fetched, client.Fetch(held));
  EXPECT_EQ(fetched.data, DocInput().data);
  // A chain reading the handle, its second step (the first row of the
  // first's output) reading no handle itself.
  v1::RunChainRequest chain = OneStepChain(DocSliceOf(held));
  v1::ChainStep& first_row = *chain.add_steps();
  v1::SliceAttrs& slice = *first_row.mutable_slice();
  for (int64_t offset : {0, 0, 0, 0}) slice.add_offsets(offset);
  for (int64_t size : {1, 1, 1, 2}) slice.add_window_sizes(size);
  for (int64_t stride : {1, 1, 1, 1}) slice.add_window_strides(stride);
  (*first_row.mutable_inputs())["input"].mutable_step()->set_step(0);
  v1::OutputDesc& row = *first_row.add_outputs();
  for (int64_t size : {1, 1, 1, 2}) row.add_sizes(size);
  chain.mutable_results(0)->set_step(1);
  ASSERT_OK_AND_ASSIGN(const Result chained, client.RunChain(chain));
  EXPECT_EQ(chained.outputs[0].data, Floats({2, 4}));
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::TensorHandle> listed, direct.ListAllHandles());
  EXPECT_FALSE(listed.empty());

  // New Puts and plain calls go to the other replicas.
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(const v1::TensorHandle fresh, client.Put(DocInput()));
    EXPECT_NE(fresh.replica(), draining.target());
    ASSERT_OK_AND_ASSIGN(const Result answer, client.Run(plain));
    EXPECT_EQ(answer.outputs[0].data, DocSliceAnswer());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - sigterm, std::chrono::seconds(15))
      << "the checks above outlasted the grace period";

  // Once its last handle is released it stops without waiting out the grace
  // period, and a call on a handle it held finds no one there.
  std::vector<v1::TensorHandle> its;
  for (const v1::TensorHandle& handle : handles) {
    if (handle.replica() == draining.target()) its.push_back(handle);
  }
  ASSERT_OK(client.Release(its));
  const int exit_status = draining.Signal(0);  // waits for the exit SIGTERM started
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  EXPECT_LT(std::chrono::steady_clock::now() - sigterm, std::chrono::seconds(19));
  const std::string unreachable = absl::StrCat("replica ", held.replica(), " holding ",
                                               held.id().substr(0, 8), "... is unreachable: ");
  EXPECT_THAT(client.Run(DocSliceOf(held)),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(StartsWith(unreachable), Not(HasSubstr(held.id())))));
  EXPECT_THAT(client.Fetch(held),
              StatusIs(absl::StatusCode::kUnavailable, StartsWith(unreachable)));
  // The rest still balances over the replicas left.
  ASSERT_OK_AND_ASSIGN(const Result answer, client.Run(plain));
  EXPECT_EQ(answer.outputs[0].data, DocSliceAnswer());
}

TEST_F(ReplicaHandlesTest, ADrainingReplicaHoldingHandlesStopsWhenTheGracePeriodEnds) {
  TensordProcess replica({"--backends=cpu", "--shutdown_grace_seconds=2", "--drain_seconds=0"});
  Client client(replica.target(), Options());
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle held, client.Put(DocInput()));
  const auto sigterm = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(replica.pid(), SIGTERM), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_OK_AND_ASSIGN(const Result sliced, client.Run(DocSliceOf(held)));
  EXPECT_EQ(sliced.outputs[0].data, DocSliceAnswer());
  const int exit_status = replica.Signal(0);  // waits for the exit SIGTERM started
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  // Served to the end of the grace period; no later than the forced exit.
  EXPECT_GE(std::chrono::steady_clock::now() - sigterm, std::chrono::milliseconds(1900));
  EXPECT_LT(std::chrono::steady_clock::now() - sigterm, std::chrono::seconds(7));
}

}  // namespace
}  // namespace tensorop::client
