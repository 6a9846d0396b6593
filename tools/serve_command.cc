// `lookalike serve`: the web UI and JSON API over a database, until SIGINT
// or SIGTERM.
#include <chrono>
#include <memory>
#include <ostream>
#include <thread>

#include "indexer/file_walker.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/dedup_flags.h"
#include "tools/flags.h"
#include "tools/serve/api.h"
#include "tools/serve/catalog.h"
#include "tools/serve/http_server.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike serve --db DB [--bind 127.0.0.1] [--port 8080] [--threads N]\n"
    "                           [--level copy] [--keep original] [--keep-in DIR]...\n\n"
    "A local web app over a database: search by uploading an image or clicking an\n"
    "indexed one, see why two images match, review duplicate groups, browse the\n"
    "collection; and the JSON API the page uses (README, \"serve\"). The database is\n"
    "opened read-only, so 'lookalike index' may update it meanwhile: new images\n"
    "appear within --reload-seconds. Images are addressed by id, never by path.\n"
    "Ctrl-C (SIGINT) or SIGTERM stops it.\n\n";

struct ServeCommandOptions {
  CatalogOptions catalog;
  HttpOptions http;
  double max_file_mb = 0;
};

void DeclareFlags(FlagGroup* g, ServeCommandOptions* c) {
  const HttpOptions dh;
  const CatalogOptions dc;
  HttpOptions* h = &c->http;
  g->Help();
  g->Path("db", &c->catalog.db, "database folder built by 'lookalike index'");
  g->Text("bind", dh.bind, "address to listen on (0.0.0.0: every interface, reachable by others)",
          [h](const std::string& v) { h->bind = v; });
  g->Value("port", &h->port, dh.port, "TCP port (0 = any free port, printed at start)");
  g->Value("threads", &h->threads, dh.threads, "request threads (0 = all cores, at least 2)");
  g->Number("max-file-mb", &c->max_file_mb,
            static_cast<double>(dc.limits.max_file_bytes) / (1 << 20),
            "uploads larger than this are refused (413), as 'index' skips such files");
  g->Value("max-pixels", &c->catalog.limits.max_pixels, dc.limits.max_pixels,
           "uploads whose header claims more pixels are refused (413)");
  g->Number("request-timeout", &h->request_seconds, dh.request_seconds,
            "seconds a client has to send a whole request before it is cut off");
  g->Number("idle-timeout", &h->idle_seconds, dh.idle_seconds,
            "seconds of silence that end a connection");
  g->Number("reload-seconds", &c->catalog.reload_seconds, dc.reload_seconds,
            "how often to look for images 'lookalike index' added meanwhile");
  // The Duplicates page's groups, as `dedup` forms them.
  DeclareDedupGroupFlags(g, &c->catalog.dedup);
}

}  // namespace

int RunServeCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    const std::atomic<bool>* cancel) {
  ServeCommandOptions c;
  FlagGroup opts("options");
  DeclareFlags(&opts, &c);
  const ParsedArgs parsed = ParseArgs(args, {&opts}, {}, {});
  if (parsed.help) {
    PrintHelp(out, kUsage, {&opts});
    return kExitOk;
  }
  if (c.catalog.db.empty()) throw UsageError("missing --db DB: the database to serve");
  for (std::string& dir : c.catalog.dedup.keep_in) dir = AbsolutePath(dir);
  if (!(c.max_file_mb > 0)) throw UsageError("--max-file-mb must be > 0");
  c.catalog.limits.max_file_bytes = static_cast<uint64_t>(c.max_file_mb * (1 << 20));
  // Searches are asked for up to kMaxApiK hits, and one more that
  // `similar` leaves out (the query itself); a request gets a prefix.
  c.catalog.search.k = kMaxApiK + 1;
  // The multipart envelope around the largest accepted image.
  c.http.max_body_bytes = c.catalog.limits.max_file_bytes + (1 << 20);
  // The option structs are validated by their constructors, once.
  std::unique_ptr<HttpServer> server;
  std::unique_ptr<Catalog> catalog;
  try {
    server = std::make_unique<HttpServer>(c.http);
    catalog = std::make_unique<Catalog>(c.catalog);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  RegisterRoutes(server.get(), catalog.get());
  const int port = server->Bind();
  std::thread serving([&server] { server->Serve(); });
  const std::string host =
      c.http.bind.find(':') != std::string::npos ? "[" + c.http.bind + "]" : c.http.bind;
  out << "lookalike serve: http://" << host << ":" << port << "/ ("
      << catalog->Current()->searcher().num_indexed() << " images; Ctrl-C stops)" << std::endl;
  // The signal handler only sets the flag; stopping happens here.
  while (!(cancel && cancel->load())) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server->Stop();
  serving.join();
  err << "lookalike serve: stopped\n";
  return kExitOk;
}

}  // namespace lookalike
