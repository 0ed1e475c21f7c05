// dsv41-server: parse flags/env into a ServerConfig, start listening at once (/health answers 503
// while the model loads), load the model and engine, serve until SIGINT/SIGTERM, then stop
// accepting, cancel in-flight requests (their streams end with an error event), close idle
// connections, and exit 0. docs/server.md.
#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "api/api.hpp"
#include "config.hpp"
#include "http/listener.hpp"

namespace net = boost::asio;
using namespace dsv41;
using namespace dsv41::server;

namespace {

// After SIGTERM, connections get this long to write their final bytes before the I/O threads
// are stopped regardless.
constexpr auto kShutdownGrace = std::chrono::seconds(5);

void log_line(const std::string& line) {
  std::fprintf(stderr, "dsv41-server: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Result<ParsedArgs> args = parse_args(argc, argv);
  if (!args) {
    log_line(args.status().message());
    return 2;
  }
  if (args->help) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  for (const std::string& w : args->warnings) log_line("warning: " + w);
  const ServerConfig& config = args->config;
  if (Status s = config.validate(); !s.is_ok()) {
    log_line(s.message());
    return 2;
  }
  std::optional<ApiKey> key;
  std::string key_origin;
  if (!config.api_key.empty()) {
    key.emplace(config.api_key);
    key_origin = "--api-key";
  } else {
    Result<ApiKey> loaded = ApiKey::load_or_create(config.api_key_file);
    if (!loaded) {
      log_line(loaded.status().message());
      return 1;
    }
    key.emplace(std::move(*loaded));
    key_origin = config.api_key_file;
  }

  Api api(config, std::move(key));
  net::io_context ioc(config.io_threads);
  HttpLimits limits{config.max_body_bytes, config.idle_timeout_s, config.read_timeout_s,
                    config.sse_keepalive_ms};
  auto listener = std::make_shared<Listener>(ioc, api, limits, config.max_connections);
  if (Status s = listener->open(config.host, config.port); !s.is_ok()) {
    log_line(s.message());
    return 1;
  }
  listener->run();

  // After the signal: poll until every connection has closed or the grace period is over.
  net::steady_timer grace(ioc);
  std::chrono::steady_clock::time_point deadline;
  std::function<void()> poll_shutdown = [&] {
    if (listener->connections() == 0 || std::chrono::steady_clock::now() >= deadline) {
      ioc.stop();
      return;
    }
    grace.expires_after(std::chrono::milliseconds(20));
    grace.async_wait([&](const boost::system::error_code& e) {
      if (!e) poll_shutdown();
    });
  };
  net::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    log_line(fmt::format("signal {}: shutting down", sig));
    listener->stop();
    api.begin_shutdown();
    deadline = std::chrono::steady_clock::now() + kShutdownGrace;
    poll_shutdown();
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < config.io_threads; ++i) threads.emplace_back([&ioc] { ioc.run(); });
  log_line(fmt::format("listening on http://{}:{} (model '{}', key from {})", config.host,
                       listener->port(), config.served_model_name, key_origin));

  log_line("loading " + config.model_dir);
  ModelParams mp;
  mp.model_dir = config.model_dir;
  mp.threads = config.threads;
  Result<Model> model = Model::load(mp);
  Status failure;
  if (!model) {
    failure = model.status();
  } else {
    Result<std::unique_ptr<EngineBackend>> backend =
        EngineBackend::create(std::move(*model), config.engine);
    if (!backend) {
      failure = backend.status();
    } else if (!api.shutting_down()) {
      api.set_backend(std::shared_ptr<GenerationBackend>(std::move(*backend)));
      log_line("ready");
    }
  }
  if (!failure.is_ok()) {
    log_line("cannot serve: " + failure.to_string());
    listener->stop();
    ioc.stop();
  }
  for (auto& t : threads) t.join();
  // All connections are gone or abandoned; stop the engine before the Api goes away.
  if (auto b = api.backend()) b->shutdown();
  log_line("stopped");
  return failure.is_ok() ? 0 : 1;
}
