#include "server/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

// Bounds that keep /metrics from starving scrapes or the process's file
// descriptors (which gRPC needs to accept connections). A connection first
// waits in a waiting room, a single poll() thread that reads its request
// without tying up a thread: at most kMaxWaiting connections (a newcomer
// evicts the oldest, so a flood of idle connections cannot keep a scraper
// out), each closed when its request is not complete kRequestDeadline after
// it connected (idle or trickling clients) or exceeds kMaxRequestBytes. Only
// complete requests reach the kHttpThreads workers (at most kQueuedRequests
// wait for one), whose answer must be written within kWriteDeadline.
constexpr size_t kMaxWaiting = 64;
constexpr std::chrono::milliseconds kRequestDeadline{2000};
constexpr size_t kMaxRequestBytes = 8192;
constexpr size_t kHttpThreads = 2;
constexpr size_t kQueuedRequests = 16;
constexpr std::chrono::milliseconds kWriteDeadline{5000};
constexpr std::chrono::milliseconds kStopPoll{100};
constexpr int kListenBacklog = 256;

using Clock = std::chrono::steady_clock;

// httplib's Server::listen hands each accepted socket to a task queue; this
// one runs the task at once on the accepting thread, where
// BoundedHttpServer::process_and_close_socket only puts the socket in the
// waiting room.
class InlineTaskQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// A socket as an httplib::Stream: first the request bytes the waiting room
// already read, then the socket, every read and write ending by one deadline.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int socket, std::string prefix, Clock::time_point deadline,
                 const std::atomic<bool>* stopping)
      : socket_(socket), prefix_(std::move(prefix)), deadline_(deadline), stopping_(stopping) {}

  bool is_readable() const override { return consumed_ < prefix_.size() || Wait(POLLIN); }
  bool is_writable() const override { return Wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (consumed_ < prefix_.size()) {
      const size_t n = std::min(size, prefix_.size() - consumed_);
      std::memcpy(ptr, prefix_.data() + consumed_, n);
      consumed_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!Wait(POLLIN)) return -1;
    while (true) {
      const ssize_t got = ::recv(socket_, ptr, size, 0);
      if (got < 0 && errno == EINTR) continue;
      return got;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Wait(POLLOUT)) return -1;
    while (true) {
      const ssize_t sent = ::send(socket_, ptr, size, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      return sent;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(::getsockname, ip, port);
  }
  socket_t socket() const override { return socket_; }

 private:
  // Waits until the socket is ready for `events`, the deadline passes or the
  // server stops (looked at every kStopPoll).
  bool Wait(short events) const {
    while (!stopping_->load(std::memory_order_relaxed)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (left.count() <= 0) return false;
      pollfd entry{socket_, events, 0};
      const int ready = ::poll(&entry, 1, static_cast<int>(std::min(left, kStopPoll).count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) continue;
      return ready > 0 && (entry.revents & (events | POLLHUP | POLLERR)) != 0;
    }
    return false;
  }

  template <typename Get>
  void Address(Get get, std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    ip.clear();
    port = 0;
    if (get(socket_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
      inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (address.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  const int socket_;
  const std::string prefix_;
  size_t consumed_ = 0;
  const Clock::time_point deadline_;
  const std::atomic<bool>* stopping_;
};

// httplib's server (routing, parsing, answering) with the connection handling
// described at the top: the waiting room and a bounded pool of workers, one
// request per connection.
class BoundedHttpServer : public httplib::Server {
 public:
  BoundedHttpServer() {
    new_task_queue = [] { return new InlineTaskQueue(); };
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    waiting_room_ = std::thread([this] { WaitingRoom(); });
    for (size_t i = 0; i < kHttpThreads; ++i) workers_.emplace_back([this] { Work(); });
  }

  ~BoundedHttpServer() override { StopNow(); }

  // Debian's build listens with a backlog of 5: a burst of connections (a
  // flood, or just many scrapers) then has SYNs dropped and retried a second
  // later. Listening again on the bound socket raises it.
  void RaiseBacklog() { ::listen(svr_sock_, kListenBacklog); }

  // Stops listening, closes waiting connections and ends the answers being
  // written at their next wait; joins the threads.
  void StopNow() {
    if (stopping_.exchange(true)) return;
    stop();
    Wake();
    ready_.notify_all();
    waiting_room_.join();
    for (std::thread& worker : workers_) worker.join();
    for (int fd : wake_) {
      if (fd >= 0) ::close(fd);
    }
  }

 private:
  struct Waiting {
    int socket;
    Clock::time_point deadline;
    std::string request;  // bytes read so far
  };
  struct Ready {
    int socket;
    std::string request;
  };

  // On the accepting thread: into the waiting room, evicting the oldest
  // connection when it is full.
  bool process_and_close_socket(socket_t socket) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        ::close(socket);
        return false;
      }
      if (arrivals_.size() + waiting_count_ >= kMaxWaiting) evict_oldest_ = true;
      if (arrivals_.size() >= kMaxWaiting) {  // a burst the waiting room has not seen yet
        ::close(arrivals_.front().socket);
        arrivals_.erase(arrivals_.begin());
      }
      arrivals_.push_back({socket, Clock::now() + kRequestDeadline, {}});
    }
    Wake();
    return true;
  }

  void Wake() {
    if (wake_[1] < 0) return;
    const char byte = 0;
    [[maybe_unused]] ssize_t ignored = ::write(wake_[1], &byte, 1);
  }

  // Reads what `waiting` sent: true when its request is complete (then it goes
  // to the workers), false while it is still partial; closes it and returns
  // true when it hung up, failed or sent too much.
  static bool ReadMore(Waiting& waiting, bool& complete) {
    char buffer[2048];
    complete = false;
    const ssize_t got = ::recv(waiting.socket, buffer, sizeof buffer, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (got <= 0) return true;  // hung up or failed
    waiting.request.append(buffer, static_cast<size_t>(got));
    if (waiting.request.find("\r\n\r\n") != std::string::npos) {
      complete = true;
      return true;
    }
    return waiting.request.size() > kMaxRequestBytes;
  }

  void WaitingRoom() {
    std::deque<Waiting> waiting;  // oldest first
    std::vector<pollfd> polled;
    while (!stopping_) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (Waiting& arrival : arrivals_) waiting.push_back(std::move(arrival));
        arrivals_.clear();
        if (evict_oldest_) {
          while (waiting.size() > kMaxWaiting - 1) {
            ::close(waiting.front().socket);
            waiting.pop_front();
          }
          evict_oldest_ = false;
        }
        waiting_count_ = waiting.size();
      }
      polled.assign(1, pollfd{wake_[0], POLLIN, 0});
      for (const Waiting& w : waiting) polled.push_back(pollfd{w.socket, POLLIN, 0});
      ::poll(polled.data(), polled.size(), static_cast<int>(kStopPoll.count()));
      if (polled[0].revents != 0) {
        char drain[64];
        while (::read(wake_[0], drain, sizeof drain) > 0) {
        }
      }
      const Clock::time_point now = Clock::now();
      std::deque<Waiting> still;
      for (size_t i = 0; i < waiting.size(); ++i) {
        Waiting& w = waiting[i];
        bool done = false, complete = false;
        if (polled[i + 1].revents != 0) done = ReadMore(w, complete);
        if (complete) {
          Hand(Ready{w.socket, std::move(w.request)});
        } else if (done || now >= w.deadline) {
          ::close(w.socket);
        } else {
          still.push_back(std::move(w));
        }
      }
      waiting.swap(still);
    }
    for (Waiting& w : waiting) ::close(w.socket);
    std::lock_guard<std::mutex> lock(mutex_);
    for (Waiting& w : arrivals_) ::close(w.socket);
    arrivals_.clear();
  }

  // A complete request to the workers, or closed when too many wait already.
  void Hand(Ready ready) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ready_queue_.size() < kQueuedRequests) {
        ready_queue_.push_back(std::move(ready));
        ready_.notify_one();
        return;
      }
    }
    ::close(ready.socket);
  }

  void Work() {
    while (true) {
      Ready next;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !ready_queue_.empty(); });
        if (stopping_) {
          for (Ready& r : ready_queue_) ::close(r.socket);
          ready_queue_.clear();
          return;
        }
        next = std::move(ready_queue_.front());
        ready_queue_.pop_front();
      }
      DeadlineStream stream(next.socket, std::move(next.request), Clock::now() + kWriteDeadline,
                            &stopping_);
      bool closed = false;
      process_request(stream, /*close_connection=*/true, closed, [](httplib::Request&) {});
      ::shutdown(next.socket, SHUT_RDWR);
      ::close(next.socket);
    }
  }

  std::atomic<bool> stopping_{false};
  int wake_[2] = {-1, -1};
  std::mutex mutex_;
  std::vector<Waiting> arrivals_;
  size_t waiting_count_ = 0;
  bool evict_oldest_ = false;
  std::deque<Ready> ready_queue_;
  std::condition_variable ready_;
  std::thread waiting_room_;
  std::vector<std::thread> workers_;
};

struct HostPort {
  std::string host;
  int port = 0;
};

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort split;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &split.port) ||
      split.port < 0 || split.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", address, "\": expected HOST:PORT"));
  }
  split.host = address.substr(0, colon);
  // [::1] -> ::1, as getaddrinfo wants it.
  if (split.host.size() >= 2 && split.host.front() == '[' && split.host.back() == ']') {
    split.host = split.host.substr(1, split.host.size() - 2);
  }
  return split;
}

// httplib's default sets SO_REUSEPORT, with which a second server on a taken
// port would bind and silently share the scrapes. SO_REUSEADDR alone still
// allows a quick restart while refusing a port another process listens on.
void ExclusiveSocketOptions(socket_t socket) {
  int yes = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, const Metrics* metrics) {
  absl::StatusOr<HostPort> host_port = SplitHostPort(address);
  if (!host_port.ok()) return host_port.status();

  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->http_ = std::make_unique<BoundedHttpServer>();
  httplib::Server& http = *server->http_;
  http.set_socket_options(ExclusiveSocketOptions);
  http.set_payload_max_length(kMaxRequestBytes);
  http.set_keep_alive_max_count(1);
  http.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics->Exposition(), std::string(kExpositionContentType));
  });

  if (host_port->port == 0) {
    server->port_ = http.bind_to_any_port(host_port->host);
  } else if (http.bind_to_port(host_port->host, host_port->port)) {
    server->port_ = host_port->port;
  } else {
    server->port_ = -1;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for metrics on ", address));
  }
  static_cast<BoundedHttpServer&>(http).RaiseBacklog();
  auto returned = std::make_shared<std::atomic<bool>>(false);
  server->listener_ = std::thread([&http, returned] {
    http.listen_after_bind();
    returned->store(true);
  });
  // stop() does nothing until the listener runs; waiting for it here makes the
  // destructor's stop() always take effect. The listener marks itself running
  // first thing, so this takes a moment.
  while (!http.is_running() && !returned->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (!listener_.joinable()) return;  // Start() failed before listening
  static_cast<BoundedHttpServer&>(*http_).StopNow();
  listener_.join();
}

}  // namespace tensorop::server
