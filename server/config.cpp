#include "config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/tunables.hpp"

namespace dsv41::server {

namespace {

// The tunables that are server flags, in --help order.
constexpr const char* kServerTunables[] = {
    "DSV41_MODEL",
    "DSV41_HOST",
    "DSV41_PORT",
    "DSV41_SERVED_MODEL_NAME",
    "DSV41_API_KEY",
    "DSV41_API_KEY_FILE",
    "DSV41_METRICS_REQUIRE_KEY",
    "DSV41_REASONING_FIELD",
    "DSV41_CLAMP_MAX_TOKENS",
    "DSV41_MAX_SEQUENCES",
    "DSV41_MAX_BATCHED_TOKENS",
    "DSV41_MAX_CONTEXT",
    "DSV41_KV_BYTES",
    "DSV41_PREFIX_CACHE_ENTRIES",
    "DSV41_SPECULATIVE_TOKENS",
    "DSV41_SPECULATIVE_METHOD",
    "DSV41_SPECULATIVE_CONFIDENCE",
    "DSV41_MAX_QUEUE",
    "DSV41_MAX_BODY_BYTES",
    "DSV41_MAX_CONNECTIONS",
    "DSV41_IO_THREADS",
    "DSV41_IDLE_TIMEOUT_S",
    "DSV41_READ_TIMEOUT_S",
    "DSV41_SSE_KEEPALIVE_MS",
    "DSV41_MAX_IMAGE_PIXELS",
    "DSV41_IMAGE_CACHE_BYTES",
    "DSV41_THREADS",
    "DSV41_BACKEND",
    // tensor parallelism (docs/tp.md)
    "DSV41_RANK",
    "DSV41_PEER",
    "DSV41_TP_BIND",
    "DSV41_TP_PORT",
    "DSV41_TP_CONNECT_TIMEOUT_MS",
    "DSV41_TP_HEARTBEAT_TIMEOUT_MS",
};

const TunableSpec* spec_of(const std::string& name) {
  for (const TunableSpec& s : tunable_specs()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

Status bad(const std::string& tunable, const std::string& what) {
  return Status(ErrorCode::kInvalidArgument,
                fmt::format("--{} ({}) {}", flag_of(tunable), tunable, what));
}

ServerConfig from_tunables(const Tunables& t) {
  ServerConfig c;
  c.model_dir = t.get_string("DSV41_MODEL");
  c.host = t.get_string("DSV41_HOST");
  c.port = static_cast<int>(t.get_int("DSV41_PORT"));
  c.api_key = t.get_string("DSV41_API_KEY");
  c.api_key_file = t.get_string("DSV41_API_KEY_FILE");
  c.served_model_name = t.get_string("DSV41_SERVED_MODEL_NAME");
  c.reasoning_field = t.get_string("DSV41_REASONING_FIELD");
  c.clamp_max_tokens = t.get_bool("DSV41_CLAMP_MAX_TOKENS");
  c.metrics_require_key = t.get_bool("DSV41_METRICS_REQUIRE_KEY");
  c.max_body_bytes = t.get_int("DSV41_MAX_BODY_BYTES");
  c.max_connections = static_cast<int>(t.get_int("DSV41_MAX_CONNECTIONS"));
  c.io_threads = static_cast<int>(t.get_int("DSV41_IO_THREADS"));
  c.idle_timeout_s = static_cast<int>(t.get_int("DSV41_IDLE_TIMEOUT_S"));
  c.read_timeout_s = static_cast<int>(t.get_int("DSV41_READ_TIMEOUT_S"));
  c.sse_keepalive_ms = static_cast<int>(t.get_int("DSV41_SSE_KEEPALIVE_MS"));
  c.max_image_pixels = t.get_int("DSV41_MAX_IMAGE_PIXELS");
  c.image_cache_bytes = t.get_int("DSV41_IMAGE_CACHE_BYTES");
  c.threads = static_cast<int>(t.get_int("DSV41_THREADS"));
  c.backend = t.get_string("DSV41_BACKEND");
  c.engine.max_sequences = static_cast<int>(t.get_int("DSV41_MAX_SEQUENCES"));
  c.engine.max_batched_tokens = t.get_int("DSV41_MAX_BATCHED_TOKENS");
  c.engine.max_context = t.get_int("DSV41_MAX_CONTEXT");
  c.engine.kv_bytes = t.get_int("DSV41_KV_BYTES");
  c.engine.prefix_cache_entries = static_cast<int>(t.get_int("DSV41_PREFIX_CACHE_ENTRIES"));
  c.engine.max_queue = static_cast<int>(t.get_int("DSV41_MAX_QUEUE"));
  c.engine.speculative_tokens = static_cast<int>(t.get_int("DSV41_SPECULATIVE_TOKENS"));
  c.engine.speculative_method = t.get_string("DSV41_SPECULATIVE_METHOD");
  c.engine.speculative_confidence = static_cast<float>(t.get_float("DSV41_SPECULATIVE_CONFIDENCE"));
  c.rank = static_cast<int>(t.get_int("DSV41_RANK"));
  c.peer = t.get_string("DSV41_PEER");
  c.tp_bind = t.get_string("DSV41_TP_BIND");
  c.tp_port = static_cast<int>(t.get_int("DSV41_TP_PORT"));
  c.tp_connect_timeout_ms = static_cast<int>(t.get_int("DSV41_TP_CONNECT_TIMEOUT_MS"));
  c.tp_heartbeat_timeout_ms = static_cast<int>(t.get_int("DSV41_TP_HEARTBEAT_TIMEOUT_MS"));
  return c;
}

}  // namespace

std::string flag_of(const std::string& tunable) {
  std::string f = tunable.rfind("DSV41_", 0) == 0 ? tunable.substr(6) : tunable;
  for (char& ch : f) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
  return f;
}

Status ServerConfig::validate() const {
  if (model_dir.empty()) return bad("DSV41_MODEL", "is required (a model directory)");
  if (host.empty()) return bad("DSV41_HOST", "is empty");
  if (port < 0 || port > 65535)
    return bad("DSV41_PORT", fmt::format("= {} must be in [0, 65535]", port));
  if (served_model_name.empty()) return bad("DSV41_SERVED_MODEL_NAME", "is empty");
  if (api_key.empty() && api_key_file.empty())
    return bad("DSV41_API_KEY_FILE", "is empty and no --api-key was given");
  if (reasoning_field != "reasoning_content" && reasoning_field != "reasoning")
    return bad("DSV41_REASONING_FIELD",
               fmt::format("= '{}' must be reasoning_content or reasoning", reasoning_field));
  // 1 KiB: the smallest body that still holds a minimal chat request.
  if (max_body_bytes < 1024)
    return bad("DSV41_MAX_BODY_BYTES", fmt::format("= {} must be >= 1024", max_body_bytes));
  if (max_connections < 1)
    return bad("DSV41_MAX_CONNECTIONS", fmt::format("= {} must be >= 1", max_connections));
  if (io_threads < 1 || io_threads > 256)
    return bad("DSV41_IO_THREADS", fmt::format("= {} must be in [1, 256]", io_threads));
  if (idle_timeout_s < 1)
    return bad("DSV41_IDLE_TIMEOUT_S", fmt::format("= {} must be >= 1", idle_timeout_s));
  if (read_timeout_s < 1)
    return bad("DSV41_READ_TIMEOUT_S", fmt::format("= {} must be >= 1", read_timeout_s));
  if (sse_keepalive_ms < 10)
    return bad("DSV41_SSE_KEEPALIVE_MS", fmt::format("= {} must be >= 10", sse_keepalive_ms));
  if (threads < 0) return bad("DSV41_THREADS", fmt::format("= {} must be >= 0", threads));
  if (backend != "cpu" && backend != "cuda")
    return bad("DSV41_BACKEND", fmt::format("= \"{}\" must be cpu or cuda", backend));
  if (max_image_pixels < 1)
    return bad("DSV41_MAX_IMAGE_PIXELS", fmt::format("= {} must be >= 1", max_image_pixels));
  if (image_cache_bytes < 0)
    return bad("DSV41_IMAGE_CACHE_BYTES", fmt::format("= {} must be >= 0", image_cache_bytes));
  if (Result<TensorParallelParams> tp = tensor_parallel(); !tp) return tp.status();
  Status s = engine.validate();
  if (!s.is_ok())
    return Status(s.code(), s.message() +
                                " (flags --max-sequences, --max-batched-tokens, "
                                "--max-context, --kv-bytes, --prefix-cache-entries, "
                                "--max-queue, --speculative-tokens, --speculative-method, "
                                "--speculative-confidence)");
  return Status::ok();
}

Result<TensorParallelParams> ServerConfig::tensor_parallel() const {
  TensorParallelParams p;
  if (peer.empty()) {
    if (rank != 0) return bad("DSV41_RANK", fmt::format("= {} needs --peer", rank));
    return p;
  }
  if (rank < 0 || rank > 1) return bad("DSV41_RANK", fmt::format("= {} must be 0 or 1", rank));
  if (tp_bind.empty()) return bad("DSV41_TP_BIND", "is required with --peer (this rank's address)");
  if (tp_port < 1 || tp_port > 65535)
    return bad("DSV41_TP_PORT", fmt::format("= {} must be in [1, 65535]", tp_port));
  p.world = 2;
  p.rank = rank;
  p.bind_address = tp_bind;
  p.peer_address = peer;
  p.port = static_cast<uint16_t>(tp_port);
  if (size_t colon = peer.rfind(':'); colon != std::string::npos) {
    p.peer_address = peer.substr(0, colon);
    const std::string port_text = peer.substr(colon + 1);
    int port_value = 0;
    const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                        std::all_of(port_text.begin(), port_text.end(),
                                    [](unsigned char ch) { return std::isdigit(ch) != 0; });
    if (digits) port_value = std::stoi(port_text);
    if (port_value < 1 || port_value > 65535)
      return bad("DSV41_PEER",
                 fmt::format("= '{}': port '{}' must be in [1, 65535]", peer, port_text));
    p.port = static_cast<uint16_t>(port_value);
  }
  if (tp_connect_timeout_ms < 1)
    return bad("DSV41_TP_CONNECT_TIMEOUT_MS",
               fmt::format("= {} must be >= 1", tp_connect_timeout_ms));
  if (tp_heartbeat_timeout_ms < 100)
    return bad("DSV41_TP_HEARTBEAT_TIMEOUT_MS",
               fmt::format("= {} must be >= 100", tp_heartbeat_timeout_ms));
  p.connect_timeout_ms = tp_connect_timeout_ms;
  p.heartbeat_timeout_ms = tp_heartbeat_timeout_ms;
  p.heartbeat_interval_ms = std::max(10, tp_heartbeat_timeout_ms / 12);
  // Engine settings that change what the follower must mirror or how much state it holds.
  p.settings = {{"max_sequences", std::to_string(engine.max_sequences)},
                {"max_batched_tokens", std::to_string(engine.max_batched_tokens)},
                {"max_context", std::to_string(engine.max_context)},
                {"kv_bytes", std::to_string(engine.kv_bytes)},
                {"prefix_cache_entries", std::to_string(engine.prefix_cache_entries)},
                {"heartbeat_timeout_ms", std::to_string(tp_heartbeat_timeout_ms)}};
  return p;
}

Result<ParsedArgs> parse_args(int argc, char** argv) {
  ParsedArgs out;
  Tunables t = Tunables::from_environment(&out.warnings);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0)
      return Status(ErrorCode::kInvalidArgument, fmt::format("unexpected argument '{}'", arg));
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const TunableSpec* spec = nullptr;
    for (const char* tn : kServerTunables) {
      if (flag_of(tn) == name) spec = spec_of(tn);
    }
    if (!spec)
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("unknown flag --{} (see --help)", name));
    if (!value) {
      const bool next_is_value = i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0;
      if (spec->type == TunableType::kBool && !next_is_value) {
        value = "true";
      } else if (!next_is_value) {
        return Status(ErrorCode::kInvalidArgument, fmt::format("--{} needs a value", name));
      } else {
        value = argv[++i];
      }
    }
    Status s = t.set(spec->name, *value);
    if (!s.is_ok()) return Status(s.code(), fmt::format("--{}: {}", name, s.message()));
  }
  out.config = from_tunables(t);
  return out;
}

std::string help_text() {
  std::string out =
      "dsv41-server: OpenAI-compatible HTTP server for DeepSeek-V4.1 (docs/server.md)\n"
      "usage: dsv41-server --model DIR [flags]\n"
      "Every flag may also be set by its environment variable; flags win.\n\n";
  for (const char* tn : kServerTunables) {
    const TunableSpec* s = spec_of(tn);
    if (!s) continue;
    const bool is_bool = s->type == TunableType::kBool;
    out += fmt::format("  --{}{}\n      env {}, default '{}': {}\n", flag_of(tn),
                       is_bool ? " [true|false]" : " VALUE", tn, s->default_value, s->doc);
  }
  return out;
}

}  // namespace dsv41::server
