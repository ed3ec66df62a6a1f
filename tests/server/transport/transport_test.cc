#include "server/transport/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace tensorop::server {
namespace {

// Polls UnsentSocketBytes() for up to 10 s until it is `expected`: TCP counts
// bytes until the peer's kernel acknowledges them, which takes a moment.
int64_t UnsentSocketBytesOnceItIs(int64_t expected) {
  int64_t unsent = UnsentSocketBytes();
  for (int i = 0; i < 1000 && unsent != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    unsent = UnsentSocketBytes();
  }
  return unsent;
}

TEST(UnsentSocketBytesTest, UnixSocketCountsUntilThePeerHasReadEverything) {
  const int64_t before = UnsentSocketBytes();
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const std::string message(1000, 'x');
  ASSERT_EQ(write(fds[0], message.data(), message.size()), 1000);
  // Unix sockets count the kernel's buffers, bookkeeping included.
  EXPECT_GE(UnsentSocketBytes(), before + 1000);

  std::string read_back(600, '\0');
  ASSERT_EQ(read(fds[1], read_back.data(), read_back.size()), 600);
  EXPECT_GT(UnsentSocketBytes(), before);
  ASSERT_EQ(read(fds[1], read_back.data(), read_back.size()), 400);
  EXPECT_EQ(UnsentSocketBytes(), before);
  close(fds[0]);
  close(fds[1]);
}

TEST(UnsentSocketBytesTest, TcpCountsWhatTheSenderStillHoldsForAPeerThatDoesNotRead) {
  const int64_t before = UnsentSocketBytes();
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t address_size = sizeof(address);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &address_size), 0);
  const int sender = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const int receiver = accept(listener, nullptr, nullptr);
  ASSERT_GE(receiver, 0);

  // Fill both kernels' buffers: what no longer fits at the receiver waits at
  // the sender.
  ASSERT_EQ(fcntl(sender, F_SETFL, O_NONBLOCK), 0);
  const std::string block(64 * 1024, 'x');
  int64_t written = 0;
  for (ssize_t n = 0; (n = write(sender, block.data(), block.size())) > 0;) written += n;
  EXPECT_GT(UnsentSocketBytes(), before);

  std::string sink(64 * 1024, '\0');
  for (int64_t taken = 0; taken < written;) {
    const ssize_t n = read(receiver, sink.data(), sink.size());
    ASSERT_GT(n, 0);
    taken += n;
  }
  EXPECT_EQ(UnsentSocketBytesOnceItIs(before), before);
  for (int fd : {sender, receiver, listener}) close(fd);
}

TEST(UnsentSocketBytesTest, PipesAndDatagramSocketsAreNotCounted) {
  const int64_t before = UnsentSocketBytes();
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  int datagram[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, datagram), 0);
  ASSERT_EQ(write(pipe_fds[1], "abc", 3), 3);
  ASSERT_EQ(write(datagram[0], "abc", 3), 3);
  EXPECT_EQ(UnsentSocketBytes(), before);
  for (int fd : {pipe_fds[0], pipe_fds[1], datagram[0], datagram[1]}) close(fd);
}

}  // namespace
}  // namespace tensorop::server
