#include "tools/serve/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

namespace lookalike {
namespace {

using Clock = std::chrono::steady_clock;

// A socket whose reads fail once the request's deadline has passed or the
// peer has been silent for the idle time.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int fd, Clock::time_point deadline, double idle_seconds)
      : fd_(fd), deadline_(deadline), idle_ms_(static_cast<int>(idle_seconds * 1000)) {}

  bool is_readable() const override { return Wait(POLLIN) > 0; }
  bool is_writable() const override { return Wait(POLLOUT) > 0; }
  ssize_t read(char* ptr, size_t size) override {
    if (Wait(POLLIN) <= 0) return -1;
    const ssize_t n = ::recv(fd_, ptr, size, 0);
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    // Writing the response is bounded by the idle time per write, not by the
    // request deadline (a large search may take longer than reading did).
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, idle_ms_) <= 0) return -1;
    return ::send(fd_, ptr, size, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(::getpeername, &ip, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(::getsockname, &ip, &port);
  }
  socket_t socket() const override { return fd_; }

 private:
  int Wait(short events) const {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd_, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, idle_ms_)));
    if (r > 0 && (p.revents & (POLLERR | POLLNVAL))) return -1;
    return r;
  }
  template <typename Fn>
  void Address(Fn fn, std::string* ip, int* port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    *port = 0;
    ip->clear();
    if (fn(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char buf[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
      *port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
      *port = ntohs(a->sin6_port);
    }
    *ip = buf;
  }

  int fd_;
  Clock::time_point deadline_;
  int idle_ms_;
};

// A fixed pool of request threads; connections wait in a queue for one.
class Pool : public httplib::TaskQueue {
 public:
  explicit Pool(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Work(); });
  }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // done, and nothing left to finish
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool done_ = false;
  std::vector<std::thread> threads_;
};

// What httplib's own error answers mean, for their JSON body.
std::string StatusText(int status) {
  switch (status) {
    case 400:
      return "malformed request";
    case 404:
      return "no such page or API route; the API is described in the README";
    case 405:
      return "method not allowed";
    case 413:
      return "request body over the upload limit";
    case 414:
      return "request line too long";
    case 416:
      return "range not satisfiable";
    default:
      return "HTTP error " + std::to_string(status);
  }
}

}  // namespace

void HttpOptions::Validate() const {
  if (port < 0 || port > 65535)
    throw std::invalid_argument("--port must be in 0..65535, got " + std::to_string(port));
  if (threads < 0 || threads > 1024)
    throw std::invalid_argument("--threads must be in 0..1024, got " + std::to_string(threads));
  if (!(request_seconds > 0)) throw std::invalid_argument("--request-timeout must be > 0 seconds");
  if (!(idle_seconds > 0)) throw std::invalid_argument("--idle-timeout must be > 0 seconds");
  if (bind.empty()) throw std::invalid_argument("--bind must name an address");
}

void SetJsonError(httplib::Response* res, int status, const std::string& message) {
  nlohmann::ordered_json j;
  j["error"] = {{"status", status}, {"message", message}};
  res->status = status;
  res->set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                   "application/json");
}

HttpServer::HttpServer(const HttpOptions& options) : options_(options) {
  options_.Validate();
  const int threads = options_.threads > 0
                          ? options_.threads
                          : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  new_task_queue = [threads] { return new Pool(threads); };
  set_payload_max_length(options_.max_body_bytes);
  set_keep_alive_max_count(1);
  set_default_headers({{"X-Content-Type-Options", "nosniff"}});
  // httplib's own answers (400 for a malformed request, 404 without a
  // route, 413 for a body over the limit) in the API's JSON form.
  set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    SetJsonError(&res, res.status, StatusText(res.status));
  });
  set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    SetJsonError(&res, 500, what);
  });
}

int HttpServer::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = bind_to_any_port(options_.bind);
    if (port <= 0)
      throw std::runtime_error("cannot listen on " + options_.bind +
                               ": check --bind names an address of this machine");
  } else if (!bind_to_port(options_.bind, port)) {
    throw std::runtime_error("cannot listen on " + options_.bind + ":" + std::to_string(port) +
                             ": the port is in use or the address is not this machine's; choose "
                             "another --port or --bind");
  }
  const std::string& b = options_.bind;
  if (b.rfind("127.", 0) == 0 || b == "::1" || b == "localhost") {
    std::set<std::string> hosts;
    for (const std::string& name :
         {std::string("localhost"), std::string("127.0.0.1"), std::string("[::1]"),
          b.find(':') != std::string::npos ? "[" + b + "]" : b}) {
      hosts.insert(name);
      hosts.insert(name + ":" + std::to_string(port));
    }
    set_pre_routing_handler([hosts](const httplib::Request& req, httplib::Response& res) {
      if (hosts.count(req.get_header_value("Host"))) return HandlerResponse::Unhandled;
      SetJsonError(&res, 403,
                   "the Host header must name this machine (localhost or 127.0.0.1): a page "
                   "from elsewhere may not use this server");
      return HandlerResponse::Handled;
    });
  }
  return port;
}

void HttpServer::Serve() { listen_after_bind(); }

void HttpServer::Stop() {
  stopping_ = true;
  stop();
  std::lock_guard<std::mutex> lock(sockets_mutex_);
  for (socket_t s : open_sockets_) ::shutdown(s, SHUT_RDWR);
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  {
    std::lock_guard<std::mutex> lock(sockets_mutex_);
    if (stopping_) {
      ::close(sock);
      return false;
    }
    open_sockets_.insert(sock);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.request_seconds));
  DeadlineStream stream(sock, deadline, options_.idle_seconds);
  bool connection_closed = false;
  const bool ok = process_request(stream, /*close_connection=*/true, connection_closed, nullptr);
  {
    std::lock_guard<std::mutex> lock(sockets_mutex_);
    open_sockets_.erase(sock);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace lookalike
