// The bounded HTTP server (bounded_http.h). (About 670 lines, past the
// project's ~600: the waiting room, the workers and the keep-alive hand-back
// between them are one class sharing its queues and lock; the httplib stream
// adapter and the plaintext socket share its poll constants and errno helper,
// and the transport room has one file left under rooms.Check's 15, so they
// stay here too.)
#include "server/transport/bounded_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include <httplib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/transport/transport.h"

namespace tensorop::server {
namespace {

constexpr std::chrono::milliseconds kStopPoll{100};
constexpr std::chrono::milliseconds kDrainAfterRefusal{1000};
constexpr int kListenBacklog = 256;
// Reads per connection per waiting-room round while a body streams in, so a
// large body does not take one poll() round per 64 KiB.
constexpr int kReadsPerRound = 16;
constexpr size_t kBodyRead = size_t{64} << 10;

using Clock = std::chrono::steady_clock;

class PlainSocket final : public Connection {
 public:
  explicit PlainSocket(int fd) : fd_(fd) {}
  ~PlainSocket() override { ::close(fd_); }
  int fd() const override { return fd_; }
  ssize_t Read(char* buffer, size_t size) override {
    while (true) {
      const ssize_t got = ::recv(fd_, buffer, size, MSG_DONTWAIT);
      if (got < 0 && errno == EINTR) continue;
      return got;
    }
  }
  ssize_t Write(const char* data, size_t size) override {
    while (true) {
      const ssize_t sent = ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      return sent;
    }
  }

 private:
  const int fd_;
};

bool WouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK; }

absl::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

// httplib's Server::listen hands each accepted socket to a task queue; this
// one runs the task at once on the accepting thread, where
// Impl::process_and_close_socket only puts the socket in the waiting room.
class InlineTaskQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// A connection as an httplib::Stream: first the request bytes the waiting
// room already read (freed once consumed, `consumed` called then), then the
// connection, every read and write ending by one deadline.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(Connection& connection, std::string prefix, std::function<void()> consumed,
                 Clock::time_point deadline, const std::atomic<bool>* stopping)
      : connection_(connection),
        prefix_(std::move(prefix)),
        consumed_prefix_(std::move(consumed)),
        deadline_(deadline),
        stopping_(stopping) {}

  bool is_readable() const override {
    return consumed_ < prefix_.size() || connection_.Pending() || Wait(POLLIN);
  }
  bool is_writable() const override { return Wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (consumed_ < prefix_.size()) {
      const size_t n = std::min(size, prefix_.size() - consumed_);
      std::memcpy(ptr, prefix_.data() + consumed_, n);
      consumed_ += n;
      // The request's bytes are now httplib's: give ours back at once.
      if (consumed_ == prefix_.size()) {
        std::string().swap(prefix_), consumed_ = 0;
        if (consumed_prefix_) consumed_prefix_();
      }
      return static_cast<ssize_t>(n);
    }
    while (true) {
      const ssize_t got = connection_.Read(ptr, size);
      if (got >= 0 || !WouldBlock()) return got;
      if (!Wait(connection_.PollEvents(POLLIN))) return -1;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    while (true) {
      const ssize_t sent = connection_.Write(ptr, size);
      if (sent >= 0 || !WouldBlock()) return sent;
      if (!Wait(connection_.PollEvents(POLLOUT))) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(::getsockname, ip, port);
  }
  socket_t socket() const override { return connection_.fd(); }

 private:
  // Waits until the socket is ready for `events`, the deadline passes or the
  // server stops (looked at every kStopPoll).
  bool Wait(short events) const {
    while (!stopping_->load(std::memory_order_relaxed)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (left.count() <= 0) return false;
      pollfd entry{connection_.fd(), events, 0};
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
    if (get(connection_.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
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

  Connection& connection_;
  std::string prefix_;
  size_t consumed_ = 0;
  std::function<void()> consumed_prefix_;
  const Clock::time_point deadline_;
  const std::atomic<bool>* stopping_;
};

std::shared_ptr<void>& ThreadHold() {
  thread_local std::shared_ptr<void> hold;
  return hold;
}

}  // namespace

void Connection::ShutdownWrite() { ::shutdown(fd(), SHUT_WR); }

std::unique_ptr<Connection> PlainConnection(int fd) { return std::make_unique<PlainSocket>(fd); }

// httplib's server (routing, parsing, answering) with the connection handling
// described in the header.
class BoundedHttpServer::Impl : public httplib::Server {
 public:
  explicit Impl(BoundedHttpOptions options) : options_(std::move(options)) {
    if (!options_.make_connection) options_.make_connection = PlainConnection;
    new_task_queue = [] { return new InlineTaskQueue(); };
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    waiting_room_ = std::thread([this] { WaitingRoom(); });
    for (size_t i = 0; i < options_.worker_threads; ++i) workers_.emplace_back([this] { Work(); });
  }

  ~Impl() override { StopNow(); }

  // Debian's build listens with a backlog of 5: a burst of connections then
  // has SYNs dropped and retried a second later. Listening again raises it.
  void RaiseBacklog() { ::listen(svr_sock_, kListenBacklog); }

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
  enum class State { kHead, kBody, kRefusing };
  struct Waiting {
    std::unique_ptr<Connection> connection;
    Clock::time_point deadline;
    std::string request;  // bytes read so far
    State state = State::kHead;
    size_t expected = 0;     // with kBody: the whole request's bytes
    int64_t body_bytes = 0;  // with kBody: its body's
    std::shared_ptr<void> hold;
    std::function<HttpRefusal(int64_t)> hold_bytes;
    std::string answer;  // with kRefusing: what is left to write
    int served = 0;      // requests this connection had answered before
    bool idle = false;   // kept alive, its next request not begun
  };
  struct Ready {
    std::unique_ptr<Connection> connection;
    std::string request;
    std::shared_ptr<void> hold;
    // Called once httplib has read `request`: what the request holds from
    // then on (its body's copies in the handler). Null: nothing is held.
    std::function<void()> consumed;
    int served = 0;
    bool pipelined = false;  // bytes after the request came with it
  };

  bool process_and_close_socket(socket_t socket) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        ::close(socket);
        return false;
      }
    }
    int yes = 1;
    ::setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    Waiting arrival;
    arrival.connection = options_.make_connection(socket);
    arrival.deadline = Clock::now() + options_.request_deadline;
    Arrive(std::move(arrival));
    return true;
  }

  // `w` (a new connection, or one kept alive) into the waiting room.
  void Arrive(Waiting w) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      if (arrivals_.size() + waiting_count_ >= options_.max_waiting) evict_oldest_ = true;
      if (arrivals_.size() >= options_.max_waiting) {  // a burst not yet seen
        arrivals_.erase(arrivals_.begin());
      }
      arrivals_.push_back(std::move(w));
    }
    Wake();
  }

  void Wake() {
    if (wake_[1] < 0) return;
    const char byte = 0;
    [[maybe_unused]] ssize_t ignored = ::write(wake_[1], &byte, 1);
  }

  void Refuse(Waiting& w, int status, const std::string& message) {
    HttpRefusal refusal = options_.render_refusal ? options_.render_refusal(status, message)
                                                  : HttpRefusal{status, "text/plain", message};
    StartRefusal(w, refusal);
  }

  static void StartRefusal(Waiting& w, const HttpRefusal& refusal) {
    w.answer = absl::StrCat("HTTP/1.1 ", refusal.status, " ", ReasonPhrase(refusal.status),
                            "\r\nContent-Type: ", refusal.content_type,
                            "\r\nContent-Length: ", refusal.body.size(),
                            "\r\nConnection: close\r\n\r\n", refusal.body);
    w.state = State::kRefusing;
    w.request.clear();
    w.request.shrink_to_fit();
    w.hold_bytes = nullptr;
    w.hold.reset();
    // Time to write the refusal and drain, whatever was left of the request's.
    w.deadline = Clock::now() + kDrainAfterRefusal;
  }

  // The headers of `w` are in (ending at `end`): admitted (reading the body
  // next, or complete), or refused.
  void Admit(Waiting& w, size_t end) {
    absl::StatusOr<HttpRequestHead> parsed =
        ParseHttpRequestHead(absl::string_view(w.request).substr(0, end));
    if (!parsed.ok()) {
      Refuse(w, 400, std::string(parsed.status().message()));
      return;
    }
    HttpRequestHead& head = *parsed;
    if (head.headers.contains("transfer-encoding") && head.headers.contains("content-length")) {
      // RFC 9112 6.1: a request smuggling attempt or a broken client.
      Refuse(w, 400, "the request has both Content-Length and Transfer-Encoding");
      return;
    }
    if (head.headers.contains("transfer-encoding")) {
      Refuse(w, 411,
             absl::StrCat("Transfer-Encoding \"", head.headers["transfer-encoding"].substr(0, 32),
                          "\" is not accepted: send the body with a Content-Length"));
      return;
    }
    if (!head.headers.contains("content-length")) {
      // None: no body (RFC 9112 6.3; tritonclient POSTs bodiless requests so).
      // Said explicitly for httplib, which would read a POST's body until
      // the connection closes.
      constexpr absl::string_view kNoBody = "Content-Length: 0\r\n";
      w.request.insert(end - 2, kNoBody.data(), kNoBody.size());
      end += kNoBody.size();
    }
    if (head.content_length > options_.max_body_bytes) {
      Refuse(w, 413,
             absl::StrCat("the request body of ", head.content_length,
                          " bytes is larger than the limit of ", options_.max_body_bytes,
                          " bytes (", options_.max_body_flag, ")"));
      return;
    }
    head.peer_certificate_subject = w.connection->PeerCertificateSubject();
    HttpAdmission admission = options_.admit(head);
    if (admission.refusal.status != 0) {
      StartRefusal(w, admission.refusal);
      return;
    }
    w.hold = std::move(admission.hold);
    w.hold_bytes = std::move(admission.hold_bytes);
    w.expected = end + static_cast<size_t>(head.content_length);
    w.body_bytes = head.content_length;
    w.state = State::kBody;
  }

  // Holds `bytes` for `w` (admission's hold_bytes); false once refused.
  bool HoldBytes(Waiting& w, int64_t bytes) {
    if (!w.hold_bytes) return true;
    HttpRefusal refusal = w.hold_bytes(bytes);
    if (refusal.status == 0) return true;
    StartRefusal(w, refusal);
    return false;
  }

  // Room in `w.request` for `want` more bytes of the body: its buffer grows
  // by doubling from kBodyRead up to the whole request, each step held
  // before it is allocated, so a body costs the room for its next read and
  // what has arrived (at most as much again), never what its Content-Length
  // announced.
  bool GrowBody(Waiting& w, size_t want) {
    const size_t needed = w.request.size() + want;
    if (needed <= w.request.capacity()) return true;
    const size_t grown =
        std::min(w.expected, std::max({needed, 2 * w.request.capacity(), kBodyRead}));
    const int64_t had = static_cast<int64_t>(w.request.capacity());
    // Both buffers exist while the bytes move.
    if (!HoldBytes(w, had + static_cast<int64_t>(grown))) return false;
    w.request.reserve(grown);
    return HoldBytes(w, static_cast<int64_t>(w.request.capacity()));
  }

  // Reads what `w` sent; returns false when it is done with (closed, or handed
  // to the workers).
  bool ReadMore(Waiting& w) {
    if (w.state == State::kRefusing) {
      if (!w.answer.empty()) {
        const ssize_t sent = w.connection->Write(w.answer.data(), w.answer.size());
        if (sent < 0 && !WouldBlock()) return false;
        if (sent > 0) w.answer.erase(0, static_cast<size_t>(sent));
        if (w.answer.empty()) w.connection->ShutdownWrite();
        return true;
      }
      // Drain what the client still sends, so closing does not reset the
      // connection before it read the refusal.
      char drain[4096];
      const ssize_t got = w.connection->Read(drain, sizeof drain);
      return got > 0 || (got < 0 && WouldBlock());
    }
    for (int round = 0; round < kReadsPerRound; ++round) {
      size_t want = 2048;
      if (w.state == State::kBody) {
        want = std::min(kBodyRead, w.expected - w.request.size());
        if (!GrowBody(w, want)) return true;  // refused: the refusal is written next
      }
      const size_t had = w.request.size();
      w.request.resize(had + want);
      const ssize_t got = w.connection->Read(w.request.data() + had, want);
      w.request.resize(had + static_cast<size_t>(std::max<ssize_t>(got, 0)));
      if (got < 0 && WouldBlock()) return true;
      if (got <= 0) return false;  // hung up or failed
      if (w.idle) {
        // A kept-alive connection's next request begins: from now on it has
        // the request deadline.
        w.idle = false;
        w.deadline = Clock::now() + options_.request_deadline;
      }
      if (w.state == State::kHead) {
        const size_t end = w.request.find("\r\n\r\n");
        if (end == std::string::npos) {
          if (w.request.size() > options_.max_header_bytes) return false;
          continue;
        }
        if (!options_.admit) {  // the request ends at its headers
          Hand(Ready{std::move(w.connection), std::move(w.request), nullptr, nullptr, w.served,
                     true});
          return false;
        }
        if (end + 4 > options_.max_header_bytes) return false;
        Admit(w, end + 4);
        if (w.state == State::kRefusing) return true;
      }
      if (w.state == State::kBody && w.request.size() >= w.expected) {
        // Bytes past the request: a pipelined next one, which is not served
        // (the connection closes after this answer; clients send it again).
        const bool pipelined = w.request.size() > w.expected;
        w.request.resize(w.expected);
        // From here on the handler's copy of the body too (httplib's, which
        // grows by doubling) until the request is answered; ours goes once
        // httplib has read it.
        const int64_t handler_bytes = kHandlerBodyCopies * w.body_bytes;
        if (!HoldBytes(w, static_cast<int64_t>(w.request.capacity()) + handler_bytes)) {
          return true;
        }
        std::function<void()> consumed;
        if (w.hold_bytes) {
          consumed = [hold_bytes = std::move(w.hold_bytes), handler_bytes] {
            hold_bytes(handler_bytes);  // smaller: never refused
          };
        }
        Hand(Ready{std::move(w.connection), std::move(w.request), std::move(w.hold),
                   std::move(consumed), w.served, pipelined});
        return false;
      }
    }
    return true;
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
          // The oldest idle kept-alive connection first, else the oldest.
          while (waiting.size() > options_.max_waiting) {
            auto idle = std::find_if(waiting.begin(), waiting.end(),
                                     [](const Waiting& w) { return w.idle; });
            waiting.erase(idle != waiting.end() ? idle : waiting.begin());
          }
          evict_oldest_ = false;
        }
        waiting_count_ = waiting.size();
      }
      polled.assign(1, pollfd{wake_[0], POLLIN, 0});
      bool pending = false;  // bytes inside a connection: do not wait in poll()
      for (const Waiting& w : waiting) {
        const bool writes = w.state == State::kRefusing && !w.answer.empty();
        const short events = w.connection->PollEvents(writes ? POLLOUT : POLLIN);
        polled.push_back(pollfd{w.connection->fd(), events, 0});
        pending = pending || (!writes && w.connection->Pending());
      }
      ::poll(polled.data(), polled.size(), pending ? 0 : static_cast<int>(kStopPoll.count()));
      if (polled[0].revents != 0) {
        char drain[64];
        while (::read(wake_[0], drain, sizeof drain) > 0) {
        }
      }
      const Clock::time_point now = Clock::now();
      std::deque<Waiting> still;
      for (size_t i = 0; i < waiting.size(); ++i) {
        Waiting& w = waiting[i];
        bool keep = true;
        const bool reads = !(w.state == State::kRefusing && !w.answer.empty());
        if (polled[i + 1].revents != 0 || (reads && w.connection->Pending())) keep = ReadMore(w);
        if (keep && now < w.deadline) still.push_back(std::move(w));
        // Otherwise the connection (if still ours) closes and its hold is
        // given back as `w` goes.
      }
      waiting.swap(still);
    }
    waiting.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    arrivals_.clear();
  }

  // A complete request to the workers, or closed when too many wait already.
  void Hand(Ready ready) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ready_queue_.size() < options_.queued_requests) {
      ready_queue_.push_back(std::move(ready));
      ready_.notify_one();
    }
  }

  void Work() {
    while (true) {
      Ready next;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !ready_queue_.empty(); });
        if (stopping_) {
          ready_queue_.clear();
          return;
        }
        next = std::move(ready_queue_.front());
        ready_queue_.pop_front();
      }
      ThreadHold() = std::move(next.hold);
      const bool last = options_.keep_alive_idle.count() == 0 || next.pipelined ||
                        next.served + 1 >= options_.keep_alive_max_requests;
      bool closed = false;  // httplib: the client asked to close, or spoke HTTP/1.0
      bool answered = false;
      {
        DeadlineStream stream(*next.connection, std::move(next.request), std::move(next.consumed),
                              Clock::now() + options_.write_deadline, &stopping_);
        answered = process_request(stream, last, closed, [](httplib::Request&) {});
      }
      ThreadHold().reset();
      if (answered && !last && !closed) {
        Waiting kept;
        kept.connection = std::move(next.connection);
        kept.deadline = Clock::now() + options_.keep_alive_idle;
        kept.served = next.served + 1;
        kept.idle = true;
        Arrive(std::move(kept));
        continue;
      }
      next.connection->ShutdownWrite();
      ::shutdown(next.connection->fd(), SHUT_RDWR);
    }
  }

  BoundedHttpOptions options_;
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

namespace {

// httplib's default sets SO_REUSEPORT, with which a second server on a taken
// port would bind and silently share the requests. SO_REUSEADDR alone still
// allows a quick restart while refusing a port another process listens on.
void ExclusiveSocketOptions(socket_t socket) {
  int yes = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BoundedHttpServer>> BoundedHttpServer::Start(
    const std::string& address, const std::string& what, BoundedHttpOptions options,
    const std::function<void(httplib::Server&)>& routes) {
  absl::StatusOr<HttpHostPort> host_port = SplitHttpHostPort(address, what);
  if (!host_port.ok()) return host_port.status();

  std::unique_ptr<BoundedHttpServer> server(new BoundedHttpServer());
  const size_t payload =
      options.admit ? static_cast<size_t>(options.max_body_bytes) : options.max_header_bytes;
  const bool keep_alive = options.keep_alive_idle.count() > 0;
  const size_t keep_alive_count = keep_alive ? options.keep_alive_max_requests : 1;
  const time_t keep_alive_seconds = std::max<time_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options.keep_alive_idle).count());
  server->http_ = std::make_unique<Impl>(std::move(options));
  Impl& http = *server->http_;
  http.set_socket_options(ExclusiveSocketOptions);
  http.set_payload_max_length(payload);
  // What httplib's Keep-Alive header tells the client (the waiting room keeps
  // the connection).
  http.set_keep_alive_max_count(keep_alive_count);
  http.set_keep_alive_timeout(keep_alive_seconds);
  routes(http);

  if (host_port->port == 0) {
    server->port_ = http.bind_to_any_port(host_port->host);
  } else if (http.bind_to_port(host_port->host, host_port->port)) {
    server->port_ = host_port->port;
  } else {
    server->port_ = -1;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(CannotListen(what, {address}));
  }
  http.RaiseBacklog();
  auto returned = std::make_shared<std::atomic<bool>>(false);
  server->listener_ = std::thread([&http, returned] {
    http.listen_after_bind();
    returned->store(true);
  });
  // stop() does nothing until the listener runs; waiting for it here makes the
  // destructor's stop() always take effect.
  while (!http.is_running() && !returned->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return server;
}

std::shared_ptr<void> BoundedHttpServer::CurrentHold() { return ThreadHold(); }

BoundedHttpServer::~BoundedHttpServer() {
  if (listener_.joinable()) {
    http_->StopNow();
    listener_.join();
  } else if (http_ != nullptr) {
    http_->StopNow();
  }
}

}  // namespace tensorop::server
