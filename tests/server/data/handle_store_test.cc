// The handle store: ids, access, quota, budget, expiry, release while in use,
// and a request's inputs resolved from handles.
#include "server/data/handle_store.h"

#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/wire/convert.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

Layout PackedUint8(std::vector<int64_t> sizes) {
  Layout layout;
  layout.dtype = DType::kUint8;
  layout.sizes = sizes;
  layout.strides = PackedStrides(sizes);
  layout.element_count = 1;
  for (int64_t size : sizes) layout.element_count *= size;
  layout.buffer_elements = layout.element_count;
  return layout;
}

HandleStoreOptions Options(MemoryBudget* budget = nullptr, int64_t per_client = 0) {
  return HandleStoreOptions{.max_bytes_per_client = per_client,
                            .replica = "10.0.0.7:50051",
                            .budget = budget,
                            .sweep_interval = absl::ZeroDuration()};
}

const HandleCaller kAnonymous{.name = "peer:10.1.1.1", .authenticated = false};
const HandleCaller kAlice{.name = "token:alice", .authenticated = true};
const HandleCaller kBob{.name = "token:bob", .authenticated = true};

// A resident [n] uint8 tensor holding 0, 1, 2, ... for `caller`.
std::shared_ptr<const ResidentTensor> Make(HandleStore& store, const HandleCaller& caller,
                                           int64_t n, absl::Duration ttl = absl::ZeroDuration()) {
  absl::StatusOr<HandleStore::Pending> pending = store.Reserve(caller, PackedUint8({n}), "test");
  EXPECT_TRUE(pending.ok()) << pending.status();
  for (int64_t i = 0; i < n; ++i) pending->data()[i] = static_cast<std::byte>(i);
  return store.Commit(*std::move(pending), ttl);
}

TEST(HandleStoreTest, IdsAre128RandomBitsAndUseFindsTheBytes) {
  HandleStore store(Options());
  std::shared_ptr<const ResidentTensor> a = Make(store, kAnonymous, 5);
  std::shared_ptr<const ResidentTensor> b = Make(store, kAnonymous, 5);
  EXPECT_THAT(a->id(), MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(a->id(), b->id());
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ResidentTensor> found,
                       store.Use(kAnonymous, a->id(), "x"));
  EXPECT_EQ(found, a);
  EXPECT_EQ(std::to_integer<int>(found->bytes()[4]), 4);
  EXPECT_EQ(store.handles(), 2);
  EXPECT_EQ(store.resident_bytes(), 10);
}

TEST(HandleStoreTest, MissingIdsAreNotFoundNamingOnlyTheirFirstCharacters) {
  HandleStore store(Options());
  const std::string id = "0123456789abcdef0123456789abcdef";
  EXPECT_THAT(store.Use(kAnonymous, id, "inputs[\"input\"].handle"),
              StatusIs(absl::StatusCode::kNotFound,
                       "inputs[\"input\"].handle: handle 01234567... does not exist on replica "
                       "10.0.0.7:50051 (released, expired, or never made here)"));
  EXPECT_EQ(ShortId("\n\x01zz"), "\\n\\x01zz");
}

TEST(HandleStoreTest, AnIdentitysHandlesDoNotExistForAnother) {
  HandleStore store(Options());
  std::shared_ptr<const ResidentTensor> alices = Make(store, kAlice, 4);
  ASSERT_OK(store.Use(kAlice, alices->id(), "x").status());
  EXPECT_THAT(store.Use(kBob, alices->id(), "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  EXPECT_THAT(store.Use(kAnonymous, alices->id(), "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  store.Release(kBob, std::vector<std::string>{alices->id()});  // not Bob's: ignored
  ASSERT_OK(store.Use(kAlice, alices->id(), "x").status());
  bool more = true;
  EXPECT_TRUE(store.List(kBob, "", 10, &more).empty());
  EXPECT_EQ(store.List(kAlice, "", 10, &more).size(), 1u);
  // Without authentication the id is the capability.
  std::shared_ptr<const ResidentTensor> open = Make(store, kAnonymous, 4);
  ASSERT_OK(store.Use(kBob, open->id(), "x").status());
}

TEST(HandleStoreTest, AViewIsItsMakersSharesItsBaseAndIsCountedOnce) {
  constexpr int64_t kBook = kHandleBookkeepingBytes;
  MemoryBudget budget(100 + 3 * kBook);
  HandleStore store(Options(&budget));
  std::shared_ptr<const ResidentTensor> base = Make(store, kAlice, 10);
  // Elements 2, 4, 6 of the base.
  Layout every_other = PackedUint8({3});
  every_other.strides = {2};
  every_other.buffer_elements = 5;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ResidentTensor> view,
                       store.MakeView(kAlice, base, every_other, 2, "slice", "a view"));
  EXPECT_EQ(view->view_of(), base.get());
  EXPECT_EQ(view->byte_offset(), 2);
  ASSERT_EQ(view->bytes().size(), 5u);
  EXPECT_EQ(view->bytes().data(), base->bytes().data() + 2);
  // One buffer's bytes, two handles' bookkeeping.
  EXPECT_EQ(store.resident_bytes(), 10);
  EXPECT_EQ(store.handles(), 2);
  EXPECT_EQ(budget.reserved(), 10 + 2 * kBook);
  // A view belongs to whoever made it: to another identity it does not exist.
  EXPECT_THAT(store.Use(kBob, view->id(), "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  ASSERT_OK(store.Use(kAlice, view->id(), "x").status());
  // A view of the view shares the first base, from its offset.
  Layout one = PackedUint8({1});
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ResidentTensor> inner,
                       store.MakeView(kAlice, view, one, 4, "transpose", "a view of a view"));
  EXPECT_EQ(inner->view_of(), base.get());
  EXPECT_EQ(inner->byte_offset(), 6);
  EXPECT_EQ(std::to_integer<int>(inner->bytes()[0]), 6);
  // Over the budget, the bookkeeping alone refuses a view, and gives its count back.
  EXPECT_THAT(store.MakeView(kAlice, base, one, 0, "slice", "a fourth handle"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_memory_bytes")));
  EXPECT_EQ(store.handles(), 3);
  // The base released and dropped: its bytes live while a view does.
  const std::string base_id = base->id();
  store.Release(kAlice, std::vector<std::string>{base_id, view->id()});
  base.reset();
  view.reset();
  EXPECT_EQ(store.resident_bytes(), 10);
  EXPECT_EQ(std::to_integer<int>(inner->bytes()[0]), 6);
  store.Release(kAlice, std::vector<std::string>{inner->id()});
  inner.reset();
  EXPECT_EQ(store.resident_bytes(), 0);
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(store.views_total(), 2);
  EXPECT_EQ(store.views_total("slice"), 1);
  EXPECT_EQ(store.views_total("transpose"), 1);
  EXPECT_EQ(store.views_total("expand"), 0);
}

TEST(HandleStoreTest, QuotaAndBudgetRefuseAndGiveBackOnRelease) {
  constexpr int64_t kBook = kHandleBookkeepingBytes;  // each handle's, in the budget
  MemoryBudget budget(100 + 2 * kBook);
  HandleStore store(Options(&budget, /*per_client=*/50));
  std::shared_ptr<const ResidentTensor> first = Make(store, kAlice, 40);
  EXPECT_EQ(budget.reserved(), 40 + kBook);
  EXPECT_THAT(store.Reserve(kAlice, PackedUint8({20}), "a Put of uint8 [20]"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "keeping the 20 bytes of a Put of uint8 [20] would take the resident bytes "
                       "of token:alice from 40 to 60, over --max_resident_bytes_per_client=50; "
                       "release handles first"));
  EXPECT_EQ(store.quota_refusals_total(), 1);
  // Another client has its own quota, but the budget is shared.
  std::shared_ptr<const ResidentTensor> bobs = Make(store, kBob, 50);
  EXPECT_THAT(store.Reserve(kAnonymous, PackedUint8({20}), "x"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_memory_bytes")));
  // Released and no longer held: the bytes are back.
  store.Release(kAlice, std::vector<std::string>{first->id()});
  EXPECT_THAT(store.Use(kAlice, first->id(), "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  EXPECT_EQ(budget.reserved(), 90 + 2 * kBook);  // `first` is still held, as by a running op
  first.reset();
  EXPECT_EQ(budget.reserved(), 50 + kBook);
  EXPECT_EQ(store.resident_bytes(), 50);
  ASSERT_OK(store.Reserve(kAlice, PackedUint8({50}), "x").status());
}

TEST(HandleStoreTest, HandlesAreCountedPerClientPendingOnesToo) {
  MemoryBudget budget(1 << 20);
  HandleStoreOptions options = Options(&budget);
  options.max_handles_per_client = 2;
  HandleStore store(options);
  std::shared_ptr<const ResidentTensor> first = Make(store, kAlice, 1);
  ASSERT_OK_AND_ASSIGN(HandleStore::Pending pending, store.Reserve(kAlice, PackedUint8({1}), "x"));
  EXPECT_EQ(budget.reserved(), 2 * (1 + kHandleBookkeepingBytes));
  EXPECT_THAT(store.Reserve(kAlice, PackedUint8({1}), "a Put of uint8 [1]"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "keeping a Put of uint8 [1] would give token:alice 3 handles, over "
                       "--max_handles_per_client=2; release handles first"));
  ASSERT_OK(store.Reserve(kBob, PackedUint8({1}), "x").status());  // a count of its own
  pending = HandleStore::Pending();  // dropped uncommitted: counted no more
  ASSERT_OK_AND_ASSIGN(pending, store.Reserve(kAlice, PackedUint8({1}), "x"));
  store.Commit(std::move(pending));
  store.Release(kAlice, std::vector<std::string>{first->id()});
  first.reset();
  ASSERT_OK(store.Reserve(kAlice, PackedUint8({1}), "x").status());
}

TEST(HandleStoreTest, AnUploadIsChargedInTheBudgetAsItIsWritten) {
  constexpr int64_t kBook = kHandleBookkeepingBytes;
  MemoryBudget budget(kBook + 1000);
  HandleStore store(Options(&budget));
  ASSERT_OK_AND_ASSIGN(
      HandleStore::Pending pending,
      store.Reserve(kAlice, PackedUint8({1000}), "a Put", -1, /*charge_as_written=*/true));
  EXPECT_EQ(budget.reserved(), kBook);
  ASSERT_OK(pending.Written(600));
  EXPECT_EQ(budget.reserved(), kBook + 600);
  // Another call takes some of the room meanwhile: the upload's next bytes no
  // longer fit.
  ASSERT_OK_AND_ASSIGN(MemoryBudget::Reservation other, budget.TryReserve(100, "other"));
  EXPECT_THAT(pending.Written(400),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_memory_bytes")));
  other.Release();
  ASSERT_OK(pending.Written(400));
  std::shared_ptr<const ResidentTensor> tensor = store.Commit(std::move(pending));
  EXPECT_EQ(budget.reserved(), kBook + 1000);
  store.Release(kAlice, std::vector<std::string>{tensor->id()});
  tensor.reset();
  EXPECT_EQ(budget.reserved(), 0);
}

TEST(HandleStoreTest, UnusedHandlesExpireAfterTheirTtlAndUseRenews) {
  HandleStoreOptions options = Options();
  options.default_ttl = absl::Seconds(10);
  options.max_ttl = absl::Seconds(60);
  HandleStore store(options);
  std::shared_ptr<const ResidentTensor> short_lived = Make(store, kAnonymous, 1);
  std::shared_ptr<const ResidentTensor> clamped = Make(store, kAnonymous, 1, absl::Hours(5));
  EXPECT_EQ(short_lived->ttl(), absl::Seconds(10));
  EXPECT_EQ(clamped->ttl(), absl::Seconds(60));
  const absl::Time now = absl::Now();
  EXPECT_EQ(store.ExpireIdle(now + absl::Seconds(5)), 0);
  EXPECT_EQ(store.ExpireIdle(now + absl::Seconds(11)), 1);
  EXPECT_EQ(store.expired_total(), 1);
  EXPECT_THAT(store.Use(kAnonymous, short_lived->id(), "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  ASSERT_OK(store.Use(kAnonymous, clamped->id(), "x").status());
  EXPECT_EQ(store.ExpireIdle(now + absl::Seconds(59)), 0);
  EXPECT_EQ(store.ExpireIdle(now + absl::Seconds(61)), 1);
  EXPECT_EQ(store.handles(), 0);
}

TEST(HandleStoreTest, ListPagesByIdForItsOwnerOnly) {
  HandleStore store(Options());
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Make(store, kAnonymous, 1)->id());
  Make(store, HandleCaller{.name = "peer:10.9.9.9"}, 1);
  std::sort(ids.begin(), ids.end());
  bool more = false;
  auto page = store.List(kAnonymous, "", 2, &more);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_TRUE(more);
  EXPECT_EQ(page[0]->id(), ids[0]);
  page = store.List(kAnonymous, page[1]->id(), 10, &more);
  ASSERT_EQ(page.size(), 3u);
  EXPECT_FALSE(more);
  EXPECT_EQ(page[2]->id(), ids[4]);
}

// ListHandles' index by owner stays the store's truth through every way a
// handle goes (release, expiry on use, expiry by the sweep) and another
// owner's handles interleaved by id never show, nor end a page early.
TEST(HandleStoreTest, ListFollowsReleaseAndExpiryAcrossInterleavedOwners) {
  HandleStore store(Options());
  const HandleCaller other{.name = "peer:10.9.9.9"};
  std::vector<std::string> mine;
  std::vector<std::shared_ptr<const ResidentTensor>> short_lived;
  for (int i = 0; i < 40; ++i) {
    mine.push_back(Make(store, kAnonymous, 1)->id());
    Make(store, other, 1);
  }
  for (int i = 0; i < 3; ++i) short_lived.push_back(Make(store, kAnonymous, 1, absl::Seconds(1)));
  const std::string used_late = Make(store, kAnonymous, 1, absl::Milliseconds(1))->id();
  EXPECT_EQ(store.handles(), 84);
  store.Release(kAnonymous, {mine.begin(), mine.begin() + 10});
  mine.erase(mine.begin(), mine.begin() + 10);
  short_lived.clear();
  absl::SleepFor(absl::Milliseconds(5));
  EXPECT_THAT(store.Use(kAnonymous, used_late, "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("x: handle ")));
  EXPECT_EQ(store.ExpireIdle(absl::Now() + absl::Seconds(5)), 3);
  std::sort(mine.begin(), mine.end());
  std::vector<std::string> listed;
  std::string after;
  bool more = true;
  while (more) {
    auto page = store.List(kAnonymous, after, 7, &more);
    ASSERT_FALSE(page.empty());
    for (const auto& tensor : page) {
      EXPECT_EQ(tensor->owner(), kAnonymous.name);
      listed.push_back(tensor->id());
    }
    after = listed.back();
  }
  EXPECT_EQ(listed, mine);
  EXPECT_EQ(store.handles(), 40 + 30);
  EXPECT_EQ(store.handles(/*on_device=*/false), 70);
  EXPECT_EQ(store.handles(/*on_device=*/true), 0);
}

TEST(HandleStoreTest, InputsResolveToTheHandlesLayoutAndBytes) {
  HandleStore store(Options());
  std::shared_ptr<const ResidentTensor> resident = Make(store, kAnonymous, 6);
  v1::RunRequest request;
  request.mutable_slice();
  (*request.mutable_inputs())["input"].mutable_handle()->set_id(resident->id());
  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
  HandlePins pins;
  DeviceInputs on_device;
  const HandleAccess access{.store = &store, .caller = kAnonymous};
  ASSERT_OK(ResolveHandleInputs(request, &access, op, pins, on_device));
  ASSERT_EQ(op.inputs.size(), 1u);
  EXPECT_EQ(op.inputs[0].tensor.desc.dtype, DType::kUint8);
  EXPECT_EQ(op.inputs[0].tensor.desc.sizes, std::vector<int64_t>{6});
  EXPECT_EQ(op.inputs[0].tensor.data.data(), resident->bytes().data());
  EXPECT_EQ(pins.size(), 1u);
  EXPECT_TRUE(on_device.empty());  // host memory

  // Given beside the handle, dtype, sizes and strides must be the handle's.
  v1::Tensor& tensor = (*request.mutable_inputs())["input"];
  tensor.set_dtype(v1::FLOAT32);
  ASSERT_OK_AND_ASSIGN(op, ToOpRequest(request));
  EXPECT_THAT(ResolveHandleInputs(request, &access, op, pins, on_device),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("inputs[\"input\"].dtype is FLOAT32 but handle ")));
  tensor.set_dtype(v1::UINT8);
  tensor.add_sizes(7);
  ASSERT_OK_AND_ASSIGN(op, ToOpRequest(request));
  EXPECT_THAT(ResolveHandleInputs(request, &access, op, pins, on_device),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("inputs[\"input\"].sizes is [7] but handle ")));
  tensor.set_sizes(0, 6);
  tensor.add_strides(1);
  ASSERT_OK_AND_ASSIGN(op, ToOpRequest(request));
  ASSERT_OK(ResolveHandleInputs(request, &access, op, pins, on_device));
  // No store: the call does not take handles.
  ASSERT_OK_AND_ASSIGN(op, ToOpRequest(request));
  EXPECT_THAT(ResolveHandleInputs(request, nullptr, op, pins, on_device),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "inputs[\"input\"].handle: this call does not take handles"));
}

// Draining (SIGTERM while handles are held): a request reading one of the
// store's handles runs, a missing one is NOT_FOUND, anything else UNAVAILABLE.
TEST(HandleStoreTest, ADrainingStoreAdmitsOnlyRequestsOnItsHandles) {
  HandleStore store(Options());
  std::shared_ptr<const ResidentTensor> resident = Make(store, kAnonymous, 6);
  const HandleAccess access{.store = &store, .caller = kAnonymous};
  v1::RunRequest on_handle;
  on_handle.mutable_slice();
  (*on_handle.mutable_inputs())["input"].mutable_handle()->set_id(resident->id());
  v1::RunRequest plain;
  plain.mutable_slice();
  v1::Tensor& data = (*plain.mutable_inputs())["input"];
  data.set_dtype(v1::UINT8);
  data.add_sizes(1);
  data.set_data("x");
  auto resolve = [&](const v1::RunRequest& request, const HandleAccess& with) {
    absl::StatusOr<OpRequest> op = ToOpRequest(request);
    EXPECT_TRUE(op.ok()) << op.status();
    HandlePins pins;
    DeviceInputs on_device;
    return ResolveHandleInputs(request, &with, *op, pins, on_device);
  };
  ASSERT_OK(resolve(plain, access));
  EXPECT_FALSE(store.draining());
  ASSERT_OK(store.Admit(false));

  store.StartDraining();
  EXPECT_TRUE(store.draining());
  const std::string refusal =
      "replica 10.0.0.7:50051 is shutting down: it serves only calls on its handles until "
      "--shutdown_grace_seconds ends";
  EXPECT_THAT(store.Admit(false), StatusIs(absl::StatusCode::kUnavailable, refusal));
  ASSERT_OK(store.Admit(true));
  EXPECT_THAT(resolve(plain, access), StatusIs(absl::StatusCode::kUnavailable, refusal));
  ASSERT_OK(resolve(on_handle, access));
  // A chain's step reading no handle is part of an admitted call.
  HandleAccess admitted = access;
  admitted.admitted = true;
  ASSERT_OK(resolve(plain, admitted));
  store.Release(kAnonymous, std::vector<std::string>{resident->id()});
  EXPECT_THAT(resolve(on_handle, access),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist on replica")));
}

}  // namespace
}  // namespace tensorop::server
