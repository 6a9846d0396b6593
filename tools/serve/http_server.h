// The HTTP layer of `serve`: cpp-httplib's Server with a fixed pool of
// request threads, one request per connection, and a deadline for reading
// each request (a client that trickles its request in, one byte at a time,
// is cut off when the deadline passes instead of holding a thread forever;
// httplib's own read timeout only bounds each single read). Errors httplib
// answers itself (bad request line, oversize body, no route) get the same
// JSON body as the API's.
#pragma once

#include <httplib.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

namespace lookalike {

struct HttpOptions {
  std::string bind = "127.0.0.1";  // address to listen on
  int port = 8080;                 // 0..65535; 0 = any free port
  int threads = 0;                 // request threads; 0 = hardware threads (at least 2)
  // A request's line, headers and body must arrive within this many
  // seconds of the connection, > 0.
  double request_seconds = 30;
  // No byte for this long ends a read, seconds, > 0.
  double idle_seconds = 10;
  uint64_t max_body_bytes = 0;  // larger bodies: 413 (set by the caller)
  // Throws std::invalid_argument naming the flag.
  void Validate() const;
};

// {"error": {"status": N, "message": "..."}} as the body of `res`.
void SetJsonError(httplib::Response* res, int status, const std::string& message);

class HttpServer : public httplib::Server {
 public:
  // Validates `options` (std::invalid_argument naming the flag).
  explicit HttpServer(const HttpOptions& options);

  // Binds; returns the port (the chosen one for port 0). Throws
  // std::runtime_error naming the address when it cannot bind. On a
  // loopback address, requests must then name this machine in their Host
  // header (localhost, 127.0.0.1, [::1] or the bound address, with or
  // without the port; 403 otherwise), so a web page whose DNS name
  // rebinds to 127.0.0.1 cannot read the API from the browser.
  int Bind();
  // Serves until Stop(); call from one thread.
  void Serve();
  // Stops accepting, cuts the connections in progress, returns at once;
  // Serve() returns when the running handlers finish.
  void Stop();

 private:
  bool process_and_close_socket(socket_t sock) override;

  HttpOptions options_;
  std::mutex sockets_mutex_;
  std::set<socket_t> open_sockets_;
  std::atomic<bool> stopping_{false};
};

}  // namespace lookalike
