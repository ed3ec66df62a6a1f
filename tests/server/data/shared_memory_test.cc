// The shared memory registry and the request/region meeting points, on a
// private directory standing in for /dev/shm.
#include "server/data/shared_memory.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/data/mapping_guard.h"
#include "server/wire/convert.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

class SharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tensorop-shm-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A file of `bytes` bytes (values 0, 1, 2, ... mod 256) named `key` in the directory.
  void MakeObject(const std::string& key, int64_t bytes) {
    const std::string path = dir_ + "/" + key;
    const int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    std::string data(static_cast<size_t>(bytes), '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 256);
    ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    close(fd);
  }

  SharedMemoryOptions Options(MemoryBudget* budget = nullptr) {
    return SharedMemoryOptions{
        .directory = dir_, .idle_timeout = absl::ZeroDuration(), .budget = budget};
  }

  std::string dir_;
};

TEST(SharedMemoryNamesTest, RegionNamesAndKeysAreChecked) {
  ASSERT_OK(CheckRegionName("in-0_a.b", "region"));
  EXPECT_THAT(CheckRegionName("", "region"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("region: \"\" is not")));
  EXPECT_THAT(CheckRegionName("a/b", "region"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"a/b\" is not a region")));
  EXPECT_THAT(CheckRegionName(std::string(65, 'a'), "region"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1..64 bytes")));
  ASSERT_OK(CheckSharedMemoryKey("/psm_1a2b", "key"));
  ASSERT_OK(CheckSharedMemoryKey("psm_1a2b", "key"));
  for (const char* bad : {"", "/", "..", "/..", ".", "../etc/passwd", "a/b", "//a", "a\\nb"}) {
    EXPECT_THAT(CheckSharedMemoryKey(bad, "key"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                           HasSubstr("is not a shared memory key")))
        << bad;
  }
  EXPECT_THAT(CheckSharedMemoryKey(std::string(256, 'k'), "key"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1..255 bytes")));
}

TEST_F(SharedMemoryTest, RegisterMapsCountsAndUnregisters) {
  MakeObject("obj", 4096);
  MemoryBudget budget(1 << 20);
  SharedMemoryRegistry registry(Options(&budget));
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::RegionInfo info, registry.Register("r", "/obj", 0));
  EXPECT_EQ(info.name, "r");
  EXPECT_EQ(info.key, "obj");
  EXPECT_EQ(info.byte_size, 4096);
  EXPECT_EQ(registry.mapped_bytes(), 4096);
  EXPECT_EQ(budget.reserved(), 4096);
  // The same again renews; another size or key is ALREADY_EXISTS naming the region.
  ASSERT_OK(registry.Register("r", "obj", 4096).status());
  EXPECT_THAT(registry.Register("r", "obj", 100).status(),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("region \"r\" is already registered with key \"obj\"")));
  ASSERT_OK_AND_ASSIGN(auto all, registry.Status(""));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].in_use, 0);
  ASSERT_OK(registry.Unregister("r"));
  EXPECT_EQ(registry.mapped_bytes(), 0);
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_THAT(registry.Unregister("r"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("region \"r\" is not registered")));
  EXPECT_THAT(registry.Status("r").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("region \"r\" is not registered")));
}

TEST_F(SharedMemoryTest, RegisterRefusesMissingTooLargeAndOverBudget) {
  MakeObject("small", 100);
  MemoryBudget budget(50);
  SharedMemoryRegistry registry(Options(&budget));
  EXPECT_THAT(registry.Register("r", "missing", 0).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("key: cannot open shared memory object \"missing\"")));
  EXPECT_THAT(registry.Register("r", "small", 101).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("byte_size: 101 bytes of shared memory object \"small\" "
                                 "requested; it has 100")));
  EXPECT_THAT(registry.Register("r", "small", 0).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_memory_bytes")));
  ASSERT_OK(registry.Register("r", "small", 50).status());
  EXPECT_EQ(registry.regions(), 1);
}

TEST_F(SharedMemoryTest, RegionAtAnOffsetMapsThoseBytes) {
  // Triton's system shared memory registers sub-ranges of an object; 5000 is
  // not a page boundary.
  MakeObject("obj", 8192);
  MemoryBudget budget(1 << 20);
  SharedMemoryRegistry registry(Options(&budget));
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::RegionInfo info,
                       registry.Register("r", "obj", 100, 5000));
  EXPECT_EQ(info.offset, 5000);
  EXPECT_EQ(info.byte_size, 100);
  EXPECT_EQ(registry.mapped_bytes(), 100);
  EXPECT_EQ(budget.reserved(), 100);
  {
    ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "input"));
    ASSERT_EQ(pin.bytes().size(), 100u);
    EXPECT_EQ(static_cast<uint8_t>(pin.bytes()[0]), 5000 % 256);
    EXPECT_EQ(static_cast<uint8_t>(pin.bytes()[99]), 5099 % 256);
  }
  // byte_size 0: the rest of the object from the offset.
  ASSERT_OK_AND_ASSIGN(info, registry.Register("rest", "obj", 0, 8000));
  EXPECT_EQ(info.byte_size, 192);
  // Renewing needs the same offset.
  ASSERT_OK(registry.Register("r", "obj", 100, 5000).status());
  EXPECT_THAT(registry.Register("r", "obj", 100, 0).status(),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("with key \"obj\", offset 5000 and byte_size 100")));
  EXPECT_THAT(registry.Register("x", "obj", 0, 8192).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("offset: 8192 is not inside shared memory object \"obj\"")));
  EXPECT_THAT(
      registry.Register("x", "obj", 0, -1).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("offset: -1 must not be negative")));
  EXPECT_THAT(registry.Register("x", "obj", 200, 8000).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("byte_size: 200 bytes of shared memory object \"obj\" "
                                 "requested from offset 8000; it has 8192")));
  // A client that shrinks the object below the region's end is caught at use.
  ASSERT_EQ(truncate((dir_ + "/obj").c_str(), 5050), 0);
  EXPECT_THAT(registry.Acquire("r", "input").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is now smaller than the 100 bytes registered")));
}

TEST_F(SharedMemoryTest, SymlinksAndDirectoriesAreNotMapped) {
  MakeObject("target", 64);
  ASSERT_EQ(symlink((dir_ + "/target").c_str(), (dir_ + "/link").c_str()), 0);
  ASSERT_EQ(mkdir((dir_ + "/dir").c_str(), 0700), 0);
  SharedMemoryRegistry registry(Options());
  EXPECT_THAT(registry.Register("r", "link", 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"link\"")));
  EXPECT_THAT(registry.Register("r", "dir", 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"dir\"")));
  EXPECT_EQ(registry.regions(), 0);
}

TEST_F(SharedMemoryTest, PinnedRegionIsNotUnregisteredNorExpired) {
  MakeObject("obj", 256);
  SharedMemoryRegistry registry(Options());
  ASSERT_OK(registry.Register("busy", "obj", 0).status());
  {
    ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("busy", "inputs"));
    EXPECT_EQ(pin.bytes().size(), 256u);
    EXPECT_EQ(static_cast<int>(pin.bytes()[7]), 7);
    EXPECT_THAT(registry.Unregister("busy"),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("region \"busy\" is in use by 1 request")));
    EXPECT_EQ(registry.ExpireIdle(absl::Now() + absl::Hours(1)), 0);
  }
  EXPECT_THAT(registry.Acquire("other", "outputs[0].shared_memory").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("outputs[0].shared_memory: shared memory region \"other\" is "
                                 "not registered")));
  EXPECT_EQ(registry.ExpireIdle(absl::Now() + absl::Hours(1)), 1);
  EXPECT_EQ(registry.regions(), 0);
  EXPECT_EQ(registry.mapped_bytes(), 0);
  EXPECT_EQ(registry.expired_total(), 1);
}

TEST_F(SharedMemoryTest, SweeperUnmapsIdleRegions) {
  MakeObject("obj", 64);
  SharedMemoryOptions options = Options();
  options.idle_timeout = absl::Milliseconds(50);
  options.sweep_interval = absl::Milliseconds(10);
  SharedMemoryRegistry registry(options);
  ASSERT_OK(registry.Register("r", "obj", 0).status());
  // No timing assertion: wait (bounded) for the sweeper to act.
  for (int i = 0; i < 1000 && registry.regions() != 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(registry.regions(), 0);
  EXPECT_EQ(registry.expired_total(), 1);
}

v1::RunRequest SliceOf(int64_t offset, int64_t length) {
  v1::RunRequest request;
  request.mutable_slice()->add_offsets(0);
  request.mutable_slice()->add_window_sizes(4);
  request.mutable_slice()->add_window_strides(1);
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::INT32);
  input.add_sizes(4);
  input.mutable_shared_memory()->set_region("r");
  input.mutable_shared_memory()->set_offset(offset);
  input.mutable_shared_memory()->set_byte_length(length);
  request.add_outputs()->add_sizes(4);
  return request;
}

TEST_F(SharedMemoryTest, InputsResolveInsideTheRegionOnly) {
  MakeObject("obj", 64);
  SharedMemoryRegistry registry(Options());
  ASSERT_OK(registry.Register("r", "obj", 0).status());
  {
    v1::RunRequest request = SliceOf(16, 16);
    ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
    SharedMemoryPins pins;
    ASSERT_OK(ResolveSharedMemoryInputs(request, &registry, "", op, pins));
    ASSERT_EQ(op.inputs[0].tensor.data.size(), 16u);
    EXPECT_EQ(static_cast<int>(op.inputs[0].tensor.data[0]), 16);
    ASSERT_OK_AND_ASSIGN(auto status, registry.Status("r"));
    EXPECT_EQ(status[0].in_use, 1);
  }
  struct Bad {
    int64_t offset, length;
    const char* message;
  };
  for (const Bad& bad :
       {Bad{56, 16,
            "inputs[\"input\"].shared_memory: offset 56 + 16 bytes passes the end of "
            "region \"r\" (64 bytes)"},
        Bad{-4, 16,
            "inputs[\"input\"].shared_memory: offset -4 and byte_length 16 must not be "
            "negative (region \"r\")"},
        Bad{2, 16,
            "inputs[\"input\"].shared_memory: offset 2 in region \"r\" is not a multiple "
            "of the element size 4"},
        Bad{8, int64_t{1} << 62 | (int64_t{1} << 61) | 1,
            "inputs[\"input\"].shared_memory: offset 8 + "}}) {
    v1::RunRequest request = SliceOf(bad.offset, bad.length);
    ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
    SharedMemoryPins pins;
    EXPECT_THAT(ResolveSharedMemoryInputs(request, &registry, "", op, pins),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(bad.message)));
  }
  // `data` and `shared_memory` are one oneof in a message, but a RunChunked
  // upload brings data beside the request's reference.
  v1::RunRequest both = SliceOf(0, 16);
  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(both));
  const std::string uploaded(16, '\0');
  op.inputs[0].tensor.data = std::as_bytes(std::span(uploaded));
  SharedMemoryPins pins;
  EXPECT_THAT(ResolveSharedMemoryInputs(both, &registry, "", op, pins),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("inputs[\"input\"]: data (16 bytes) and shared_memory are both "
                                 "set")));
  v1::RunRequest missing = SliceOf(0, 16);
  (*missing.mutable_inputs())["input"].mutable_shared_memory()->set_region("nope");
  ASSERT_OK_AND_ASSIGN(OpRequest op2, ToOpRequest(missing));
  EXPECT_THAT(ResolveSharedMemoryInputs(missing, &registry, "", op2, pins),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("inputs[\"input\"].shared_memory: shared memory region \"nope\" "
                                 "is not registered")));
  EXPECT_THAT(ResolveSharedMemoryInputs(missing, nullptr, "", op2, pins),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no shared memory")));
}

TEST_F(SharedMemoryTest, OutputsAreBoundsCheckedPaddedAndDoNotOverlapInputs) {
  MakeObject("obj", 128);
  SharedMemoryRegistry registry(Options());
  ASSERT_OK(registry.Register("r", "obj", 0).status());
  v1::RunRequest request = SliceOf(0, 16);
  Layout padded{.dtype = DType::kInt32,
                .sizes = {2, 2},
                .strides = {4, 1},
                .element_count = 4,
                .buffer_elements = 6};
  auto output_at = [&](int64_t offset, int64_t length) {
    v1::SharedMemoryRef* ref = request.mutable_outputs(0)->mutable_shared_memory();
    ref->set_region("r");
    ref->set_offset(offset);
    ref->set_byte_length(length);
  };
  ASSERT_OK_AND_ASSIGN(OpRequest op, ToOpRequest(request));
  SharedMemoryPins pins;
  ASSERT_OK(ResolveSharedMemoryInputs(request, &registry, "", op, pins));
  output_at(8, 24);
  EXPECT_THAT(SharedMemoryOutput(request, 0, padded, &registry, "", pins).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outputs[0].shared_memory: bytes [8, 32) of region \"r\" overlap "
                                 "those of inputs[\"input\"].shared_memory [0, 16)")));
  output_at(64, 20);
  EXPECT_THAT(SharedMemoryOutput(request, 0, padded, &registry, "", pins).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outputs[0].shared_memory: byte_length 20 is less than the 24 "
                                 "bytes the output takes (sizes [2,2], strides [4,1]) in region "
                                 "\"r\"")));
  output_at(112, 24);
  EXPECT_THAT(SharedMemoryOutput(request, 0, padded, &registry, "", pins).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outputs[0].shared_memory: offset 112 + 24 bytes passes the end "
                                 "of region \"r\" (128 bytes)")));
  output_at(64, 24);
  ASSERT_OK_AND_ASSIGN(std::byte * out,
                       SharedMemoryOutput(request, 0, padded, &registry, "", pins));
  // Padded: the extent is zeroed for the kernel to fill; bytes past it are untouched.
  for (int i = 0; i < 24; ++i) EXPECT_EQ(static_cast<int>(out[i]), 0) << i;
  EXPECT_EQ(static_cast<int>(out[24]), 88);
  EXPECT_EQ(SharedMemoryOutputBytes(request, {padded}), 24);
  EXPECT_THAT(CheckNoSharedMemoryOutputs(request, "RunStream"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outputs[0].shared_memory: RunStream streams its results")));
  // An output without a reference is the server's to allocate.
  request.mutable_outputs(0)->clear_shared_memory();
  ASSERT_OK_AND_ASSIGN(std::byte * none,
                       SharedMemoryOutput(request, 0, padded, &registry, "", pins));
  EXPECT_EQ(none, nullptr);
}

// Issue 36, item 2: an object shrunk under a request's feet.
TEST_F(SharedMemoryTest, AnObjectShrunkWhileInUseFaultsTheRegionNotTheProcess) {
  MakeObject("shrinks", 3 * 4096);
  SharedMemoryRegistry registry(Options());
  ASSERT_OK(registry.Register("r", "shrinks", 0).status());
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "inputs"));
  SharedMemoryPins pins;
  pins.pins.push_back(std::move(pin));
  ASSERT_OK(CheckSharedMemoryIntact(pins));
  std::span<std::byte> bytes = pins.pins[0].bytes();
  EXPECT_EQ(static_cast<int>(bytes[4097]), 1);  // 4097 % 256
  ASSERT_EQ(truncate((dir_ + "/shrinks").c_str(), 0), 0);
  // Past the object's new end: SIGBUS without the guard. With it, the read
  // completes on a stand-in zero page and the region says so.
  volatile std::byte* past_end = bytes.data() + 4097;
  EXPECT_EQ(static_cast<int>(*past_end), 0);
  bytes[8000] = std::byte{7};  // a write, as an output's, completes too
  EXPECT_TRUE(pins.pins[0].faulted());
  EXPECT_THAT(
      CheckSharedMemoryIntact(pins),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("shared memory object \"shrinks\" of region \"r\" shrank while "
                         "a request used it; unregister the region and register it again")));
  // Every later use is refused until it is registered again.
  EXPECT_THAT(registry.Acquire("r", "inputs[\"input\"].shared_memory").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("inputs[\"input\"].shared_memory: shared memory object")));
  pins.pins.clear();
  ASSERT_OK(registry.Unregister("r"));
  MakeObject("shrinks", 4096);
  ASSERT_OK(registry.Register("r", "shrinks", 0).status());
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin again, registry.Acquire("r", "inputs"));
  EXPECT_FALSE(again.faulted());
  EXPECT_EQ(static_cast<int>(again.bytes()[5]), 5);
}

// An object unlinked and made again under `key` (a new inode), `bytes` bytes
// of `fill`, as a client does after its restart.
void Recreate(const std::string& dir, const std::string& key, int64_t bytes, char fill) {
  const std::string path = dir + "/" + key;
  ASSERT_EQ(unlink(path.c_str()), 0);
  const int fd = open(path.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  const std::string data(static_cast<size_t>(bytes), fill);
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
}

// Issue 42, item 9: a re-created object registered again kept the old
// mapping (the unlinked inode) and answered OK.
TEST_F(SharedMemoryTest, ARecreatedObjectRegisteredAgainIsMappedAgain) {
  MakeObject("obj", 4096);
  MemoryBudget budget(1 << 20);
  SharedMemoryRegistry registry(Options(&budget));
  ASSERT_OK(registry.Register("r", "obj", 0).status());
  const std::byte* first = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "input"));
    EXPECT_EQ(static_cast<int>(pin.bytes()[5]), 5);
    first = pin.bytes().data();
  }
  // The same object again only renews: the mapping stays.
  ASSERT_OK(registry.Register("r", "obj", 4096).status());
  {
    ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "input"));
    EXPECT_EQ(pin.bytes().data(), first);
  }
  Recreate(dir_, "obj", 4096, '\x5a');
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::RegionInfo info, registry.Register("r", "/obj", 0));
  EXPECT_EQ(info.byte_size, 4096);
  {
    ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "input"));
    EXPECT_EQ(static_cast<int>(pin.bytes()[5]), 0x5a);
    EXPECT_EQ(static_cast<int>(pin.bytes()[4095]), 0x5a);
    // A write lands in the object the client sees.
    pin.bytes()[7] = std::byte{0x11};
  }
  {
    const int fd = open((dir_ + "/obj").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    char byte = 0;
    ASSERT_EQ(pread(fd, &byte, 1, 7), 1);
    close(fd);
    EXPECT_EQ(byte, '\x11');
  }
  // The old mapping is gone with its reservation: one region, its bytes once.
  EXPECT_EQ(registry.regions(), 1);
  EXPECT_EQ(registry.mapped_bytes(), 4096);
  EXPECT_EQ(budget.reserved(), 4096);
  // Re-created larger, byte_size 0 maps the whole new object.
  Recreate(dir_, "obj", 8192, '\x33');
  ASSERT_OK_AND_ASSIGN(info, registry.Register("r", "obj", 0));
  EXPECT_EQ(info.byte_size, 8192);
  EXPECT_EQ(registry.mapped_bytes(), 8192);
  EXPECT_EQ(budget.reserved(), 8192);
  // Unlinked and not made again: NOT_FOUND saying the region keeps what it maps.
  ASSERT_EQ(unlink((dir_ + "/obj").c_str()), 0);
  EXPECT_THAT(registry.Register("r", "obj", 0).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("key: cannot open shared memory object \"obj\"")));
  EXPECT_THAT(registry.Register("r", "obj", 0).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("; region \"r\" still maps the object it named when it was "
                                 "registered")));
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "input"));
  EXPECT_EQ(static_cast<int>(pin.bytes()[8000]), 0x33);
}

// Issue 42, item 9: while a request uses the region its mapping stays; the
// re-registration says why it cannot map the new object yet.
TEST_F(SharedMemoryTest, ReRegisteringARecreatedObjectInUseIsRefused) {
  MakeObject("obj", 4096);
  MemoryBudget budget(1 << 20);
  SharedMemoryRegistry registry(Options(&budget));
  ASSERT_OK(registry.Register("r", "obj", 0).status());
  {
    ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "input"));
    Recreate(dir_, "obj", 4096, '\x5a');
    EXPECT_THAT(registry.Register("r", "obj", 0).status(),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("shared memory object \"obj\" was re-created since region "
                                   "\"r\" mapped it; the region is in use by 1 request and "
                                   "keeps its mapping until they finish: register it again then")));
    // The request still reads what it was given.
    EXPECT_EQ(static_cast<int>(pin.bytes()[5]), 5);
    EXPECT_EQ(budget.reserved(), 4096);
  }
  ASSERT_OK(registry.Register("r", "obj", 0).status());
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "input"));
  EXPECT_EQ(static_cast<int>(pin.bytes()[5]), 0x5a);
  EXPECT_EQ(budget.reserved(), 4096);
}

// Issue 42, item 10: a truncation inside the last page faults nowhere (the
// cut bytes read as zeros); the check after the request's work finds it.
TEST_F(SharedMemoryTest, AnObjectShrunkInsideItsLastPageFailsTheIntactnessCheck) {
  constexpr int64_t kBytes = 3 * 4096;
  MakeObject("shrinks", kBytes);
  SharedMemoryRegistry registry(Options());
  ASSERT_OK(registry.Register("r", "shrinks", 0).status());
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin pin, registry.Acquire("r", "inputs"));
  SharedMemoryPins pins;
  pins.pins.push_back(std::move(pin));
  ASSERT_OK(CheckSharedMemoryIntact(pins));
  std::span<std::byte> bytes = pins.pins[0].bytes();
  EXPECT_EQ(static_cast<int>(bytes[kBytes - 1]), (kBytes - 1) % 256);
  ASSERT_EQ(truncate((dir_ + "/shrinks").c_str(), kBytes - 100), 0);
  volatile std::byte* cut = bytes.data() + kBytes - 1;
  EXPECT_EQ(static_cast<int>(*cut), 0);  // no SIGBUS, no stand-in: a zero
  EXPECT_FALSE(pins.pins[0].faulted());
  EXPECT_THAT(
      CheckSharedMemoryIntact(pins),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("shared memory object \"shrinks\" of region \"r\" shrank while "
                         "a request used it; unregister the region and register it again")));
  // Marked as a fault marks it: every later use is refused.
  EXPECT_TRUE(pins.pins[0].faulted());
  EXPECT_THAT(registry.Acquire("r", "inputs[\"input\"].shared_memory").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("inputs[\"input\"].shared_memory: shared memory object "
                                 "\"shrinks\" of region \"r\" shrank while a request used it")));
  // While the request holds it, registering it again says why it cannot.
  EXPECT_THAT(registry.Register("r", "shrinks", 0).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("of region \"r\" shrank while a request used it; the region is "
                                 "in use by 1 request")));
  pins.pins.clear();
  // Then it maps the object as it is now.
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::RegionInfo info, registry.Register("r", "shrinks", 0));
  EXPECT_EQ(info.byte_size, kBytes - 100);
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin again, registry.Acquire("r", "inputs"));
  EXPECT_FALSE(again.faulted());
  SharedMemoryPins intact;
  intact.pins.push_back(std::move(again));
  ASSERT_OK(CheckSharedMemoryIntact(intact));
}

// Issue 36, item 9: with authentication, regions are private to an identity.
TEST_F(SharedMemoryTest, RegionsOfOneIdentityAreInvisibleToAnother) {
  MakeObject("alice-secret", 4096);
  MakeObject("bob-own", 4096);
  SharedMemoryRegistry registry(Options());
  const SharedMemoryCaller alice{.owner = "token:alice"};
  const SharedMemoryCaller bob{.owner = "token:bob"};
  ASSERT_OK(registry.Register("secret", "alice-secret", 0, 0, alice).status());
  ASSERT_OK_AND_ASSIGN(auto listed, registry.Status("", bob.owner));
  EXPECT_TRUE(listed.empty());
  EXPECT_THAT(registry.Status("secret", bob.owner).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"secret\" is not registered")));
  EXPECT_THAT(registry.Acquire("secret", "inputs", bob.owner).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("inputs: shared memory region \"secret\" is not registered")));
  EXPECT_THAT(registry.Unregister("secret", bob.owner),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"secret\" is not registered")));
  // Nor may bob map alice's object under a name of his own.
  EXPECT_THAT(registry.Register("mine", "/alice-secret", 0, 0, bob).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("key: shared memory object \"/alice-secret\" is mapped for "
                                 "another identity")));
  // The same name is bob's own region.
  ASSERT_OK(registry.Register("secret", "bob-own", 0, 0, bob).status());
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin bobs, registry.Acquire("secret", "x", bob.owner));
  EXPECT_EQ(bobs.key(), "bob-own");
  ASSERT_OK_AND_ASSIGN(SharedMemoryRegistry::Pin alices,
                       registry.Acquire("secret", "x", alice.owner));
  EXPECT_EQ(alices.key(), "alice-secret");
  ASSERT_OK_AND_ASSIGN(listed, registry.Status("", alice.owner));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].key, "alice-secret");
}

TEST_F(SharedMemoryTest, ARemoteCallerCannotRegister) {
  MakeObject("obj", 4096);
  SharedMemoryRegistry registry(Options());
  EXPECT_THAT(
      registry.Register("r", "obj", 0, 0, SharedMemoryCaller{.owner = "", .local = false}).status(),
      StatusIs(absl::StatusCode::kPermissionDenied,
               HasSubstr("shared memory is for clients on the server's host")));
  EXPECT_EQ(registry.regions(), 0);
  SharedMemoryOptions remote = Options();
  remote.allow_remote = true;
  SharedMemoryRegistry open(remote);
  ASSERT_OK(
      open.Register("r", "obj", 0, 0, SharedMemoryCaller{.owner = "", .local = false}).status());
}

TEST(SharedMemoryPeerTest, LocalPeersAreUnixSocketsAndLoopback) {
  for (const char* local :
       {"unix:/run/tensord.sock", "unix:", "ipv4:127.0.0.1:5000", "ipv4:127.9.9.9:1",
        "ipv6:[::1]:5000", "ipv6:%5B::1%5D:5000", "ipv6:[::ffff:127.0.0.1]:7"}) {
    EXPECT_TRUE(IsLocalGrpcPeer(local)) << local;
  }
  for (const char* remote : {"ipv4:10.0.0.1:5000", "ipv4:128.0.0.1:1", "ipv6:[2001:db8::1]:5",
                             "ipv6:%5B::2%5D:5", "ipv6:[::ffff:10.1.1.1]:7", "", "ipv4:"}) {
    EXPECT_FALSE(IsLocalGrpcPeer(remote)) << remote;
  }
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("::ffff:127.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("192.168.1.5"));
  EXPECT_FALSE(IsLoopbackAddress(""));
}

}  // namespace
}  // namespace tensorop::server
