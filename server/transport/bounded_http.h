// A bounded HTTP/1.1 server: cpp-httplib (Debian's libcpp-httplib-dev) for
// routing, parsing and answering, with the connection handling that keeps
// slow or hostile clients from holding threads, memory or descriptors.
//
// A connection first waits in a waiting room, a single poll() thread that
// reads its request without tying up a thread: at most `max_waiting`
// connections (a newcomer evicts the oldest, so a flood of idle connections
// cannot keep others out), each closed when its request is not complete
// `request_deadline` after it connected (idle or trickling clients) or its
// headers pass `max_header_bytes`. With `admit` set, once the headers are in
// the request is admitted or refused before its body is read: its body is
// what Content-Length says (none: no body; chunked bodies are refused with
// 411) and at most `max_body_bytes` (413), and `admit` may refuse it (401, 429, ...) or hand
// back what it holds for it and how to hold the body's bytes as they arrive (a
// memory budget reservation, grown with the buffer). A head that framing could
// be read two ways from (ParseHttpRequestHead) is refused with 400. Only complete requests reach
// the `worker_threads` workers (at most `queued_requests` wait for one), whose answer must be
// written within `write_deadline`. With `keep_alive_idle` set, an answered connection goes
// back to the waiting room for its next request (HTTP/1.1 keep-alive): it may wait that long
// for the request's first byte, then has `request_deadline` for the rest, and an idle one is
// the first evicted when the room is full; a connection that asked to close, spoke HTTP/1.0
// or sent a request before its answer (pipelining) is closed after the answer. Otherwise one
// request per connection. Accepted sockets have TCP_NODELAY: an answer's last segment is not
// held back waiting for the client's ACK.
//
// TLS seam: every byte goes through a Connection made by `make_connection`
// (plaintext sockets by default); a TLS session (server/transport/tls_stream.h) plugs in
// there without touching the waiting room or the workers.
#ifndef TENSOROP_SERVER_TRANSPORT_BOUNDED_HTTP_H_
#define TENSOROP_SERVER_TRANSPORT_BOUNDED_HTTP_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/transport/http_head.h"

namespace httplib {
class Server;
}

namespace tensorop::server {

// One accepted connection's byte stream. Read and Write never block: they
// return what they could move, or -1 with errno EAGAIN when the socket is not
// ready (a TLS session may want to write while reading, which it handles
// inside), -1 with another errno on failure, 0 from Read at end of stream.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual int fd() const = 0;
  virtual ssize_t Read(char* buffer, size_t size) = 0;
  virtual ssize_t Write(const char* data, size_t size) = 0;
  // What to poll() for before the next call, given what the caller means to
  // do next (`next`: POLLIN to read, POLLOUT to write): a TLS session may need
  // the other direction first.
  virtual short PollEvents(short next) const { return next; }
  // True when bytes already received wait inside the connection, where
  // poll() cannot see them (TLS records): read before polling again.
  virtual bool Pending() const { return false; }
  // Ends the writing side once the answer is written (TLS: close_notify,
  // best effort, then FIN).
  virtual void ShutdownWrite();
  // The subject of the client certificate the connection verified (TLS with a
  // client CA: TlsSession::PeerCertificateSubject); empty otherwise.
  virtual std::string PeerCertificateSubject() const { return ""; }
};

// A plaintext socket (owned: closed when destroyed).
std::unique_ptr<Connection> PlainConnection(int fd);

// The answer to a request refused before its body is read.
struct HttpRefusal {
  int status = 0;
  std::string content_type;
  std::string body;
};

// A body's copies in its handler: httplib's, which grows by doubling.
inline constexpr int64_t kHandlerBodyCopies = 2;

// What `admit` decides: a refusal, or admission with what it holds for the
// request (released once the request is answered; may be null).
struct HttpAdmission {
  HttpRefusal refusal;  // status 0: admitted
  std::shared_ptr<void> hold;
  // Called in the waiting room as the body arrives, with the bytes the
  // request holds in all from then on (its buffer before each step it grows;
  // once complete, also the handler's copies): a refusal (status != 0) is the
  // answer instead. Called once more, on the handler's thread, when httplib
  // has read the waiting room's buffer and it is freed: with the handler's
  // copies alone (kHandlerBodyCopies bodies; never refused). Null: nothing is
  // held.
  std::function<HttpRefusal(int64_t bytes)> hold_bytes;
};

struct BoundedHttpOptions {
  size_t max_waiting = 64;
  std::chrono::milliseconds request_deadline{2000};
  size_t max_header_bytes = 8192;
  // With `admit` null: none (the request ends at its headers, as /metrics
  // reads it). Otherwise the largest body accepted.
  int64_t max_body_bytes = 0;
  // The flag that sets max_body_bytes, named in the 413 refusal.
  std::string max_body_flag;
  size_t worker_threads = 2;
  size_t queued_requests = 16;
  std::chrono::milliseconds write_deadline{5000};
  // How long an answered connection may stay open for its next request; 0:
  // one request per connection (Connection: close).
  std::chrono::milliseconds keep_alive_idle{0};
  // The most requests one kept-alive connection serves before it is closed.
  int keep_alive_max_requests = 1000;
  // Called in the waiting room for every request whose headers are in and
  // whose declared body fits max_body_bytes, with the head's
  // peer_certificate_subject set from its connection; must not block.
  std::function<HttpAdmission(const HttpRequestHead&)> admit;
  // The refusals the server itself makes (411, 413, 400): status and message
  // to a body. Null: a text/plain body of the message.
  std::function<HttpRefusal(int status, const std::string& message)> render_refusal;
  // Wraps each accepted socket. Null: PlainConnection.
  std::function<std::unique_ptr<Connection>(int fd)> make_connection;
};

class BoundedHttpServer {
 public:
  // Binds `address` (port 0 picks a free one) and starts serving with routes
  // that `routes` adds to the httplib server. UNAVAILABLE naming `what` (the
  // flag: "--http_address"), the address and the OS's reason when it cannot be
  // bound, INVALID_ARGUMENT when it is not HOST:PORT.
  static absl::StatusOr<std::unique_ptr<BoundedHttpServer>> Start(
      const std::string& address, const std::string& what, BoundedHttpOptions options,
      const std::function<void(httplib::Server&)>& routes);
  // Stops listening, closes waiting connections, ends the answers being
  // written at their next wait and joins.
  ~BoundedHttpServer();
  BoundedHttpServer(const BoundedHttpServer&) = delete;
  BoundedHttpServer& operator=(const BoundedHttpServer&) = delete;

  int port() const { return port_; }

  // In a route handler: what `admit` held for the request being handled on
  // this worker thread (null without one). httplib 0.11's Request carries no
  // user data, and a worker handles one request at a time.
  static std::shared_ptr<void> CurrentHold();

 private:
  BoundedHttpServer() = default;
  class Impl;

  std::unique_ptr<Impl> http_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TRANSPORT_BOUNDED_HTTP_H_
