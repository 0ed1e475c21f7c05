// dsv41-server: parse flags/env into a ServerConfig, start listening at once (/health answers 503
// while the model loads), load the model and engine, serve until SIGINT/SIGTERM, then stop
// accepting, cancel in-flight requests (their streams end with an error event), close idle
// connections, and exit 0. docs/server.md.
#include <fmt/format.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
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

// Rank 1 of a TP pair (docs/tp.md "Rank processes"): no HTTP, no key; loads its half of the
// model, connects to rank 0 and mirrors its steps until rank 0 stops (exit 0), SIGINT/SIGTERM
// (exit 0) or the link fails (exit 1, message on stderr).
int run_follower_rank(const ServerConfig& config, const TensorParallelParams& tp) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2);                   // main's "exit now" to the signal thread
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // only the signal thread below sees them
  std::atomic<bool> stop{false};
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGUSR2) return;  // woken by main to exit
    log_line(fmt::format("signal {}: stopping the follower", sig));
    stop = true;
  });
  log_line(fmt::format("TP rank {}: loading {}, connecting to rank 0 at {}:{} from {}", tp.rank,
                       config.model_dir, tp.peer_address, tp.port, tp.bind_address));
  ModelParams mp;
  mp.model_dir = config.model_dir;
  mp.threads = config.threads;
  // As rank 0's: the backend and the draft module decide the collectives of every step (the
  // rendezvous refuses a pair that disagrees; --backend and --speculative-method were once
  // dropped here, so a follower given them by flag loaded the defaults).
  mp.backend = config.backend;
  mp.dspark = config.dspark();
  mp.tp = tp;
  mp.tp.cancel = &stop;  // SIGTERM/SIGINT while still connecting ends the connect retry loop
  Status result;
  bool linked = false;
  {
    Result<Model> model = Model::load(mp);
    if (!model) {
      result = model.status();
    } else {
      linked = true;
      log_line("TP follower ready");
      result = model->run_tp_follower(&stop);
    }
  }
  if (!stop) pthread_kill(signals.native_handle(), SIGUSR2);
  signals.join();
  if (stop && !linked) {
    log_line("TP follower stopped by signal before the link to rank 0 was up (" + result.message() +
             ")");
    return 0;
  }
  if (result.is_ok() || result.code() == ErrorCode::kCancelled) {
    log_line("TP follower stopped");
    return 0;
  }
  log_line("TP follower failed: " + result.to_string());
  return 1;
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
  const TensorParallelParams tp = *config.tensor_parallel();
  if (tp.world > 1 && tp.rank > 0) return run_follower_rank(config, tp);
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

  log_line("loading " + config.model_dir + " (backend " + config.backend + ")");
  ModelParams mp;
  mp.model_dir = config.model_dir;
  mp.threads = config.threads;
  mp.backend = config.backend;
  mp.dspark = config.dspark();
  mp.tp = tp;
  Result<Model> model = Model::load(mp);
  Status failure;
  std::shared_ptr<GenerationBackend> served;
  std::thread tp_watch;
  std::atomic<bool> tp_watch_stop{false};
  if (!model) {
    failure = model.status();
  } else {
    // TP rank 0: a failed link (rank 1 died, link stalled) makes /health answer 503 at once;
    // in-flight requests already fail with the link's error inside the engine.
    if (tp.world > 1) {
      tp_watch = std::thread([&api, &tp_watch_stop, probe = model->tp_health_probe(),
                              peer = fmt::format("rank {} at {}", 1 - tp.rank, tp.peer_address)] {
        while (!tp_watch_stop) {
          if (Status s = probe(); !s.is_ok()) {
            log_line("TP link failed, no longer serving (restart both ranks): " + s.to_string());
            api.set_unavailable("the tensor-parallel peer (" + peer +
                                ") was lost, restart both ranks: " + s.message());
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
    }
    Result<std::unique_ptr<EngineBackend>> backend =
        EngineBackend::create(std::move(*model), config.engine);
    if (!backend) {
      failure = backend.status();
    } else if (!api.shutting_down()) {
      served = std::shared_ptr<GenerationBackend>(std::move(*backend));
      api.set_backend(served);
      log_line("ready");
    }
  }
  if (!failure.is_ok()) {
    log_line("cannot serve: " + failure.to_string());
    listener->stop();
    ioc.stop();
  }
  for (auto& t : threads) t.join();
  tp_watch_stop = true;
  if (tp_watch.joinable()) tp_watch.join();
  // All connections are gone or abandoned; stop the engine before the Api goes away.
  if (served) served->shutdown();
  api.set_backend(nullptr);
  served.reset();
  log_line("stopped");
  return failure.is_ok() ? 0 : 1;
}
