// ServerConfig: every knob of dsv41-server, read from the tunables registry (DSV41_* environment,
// libdsv41/src/core/tunables_table.cpp) and overridden by command-line flags. Each server tunable
// is one flag: DSV41_MAX_BODY_BYTES ↔ --max-body-bytes (docs/server.md "Flags and environment").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"
#include "dsv41/status.hpp"

namespace dsv41::server {

struct ServerConfig {
  std::string model_dir;
  std::string host = "0.0.0.0";
  int port = 8000;
  std::string api_key;  // literal key (flag/env); empty = api_key_file
  std::string api_key_file = "dsv41-api-key";
  std::string served_model_name = "deepseek-v4.1-flash";
  std::string reasoning_field = "reasoning_content";
  bool clamp_max_tokens = true;
  bool metrics_require_key = false;
  int64_t max_body_bytes = 64 << 20;
  int max_connections = 256;
  int io_threads = 2;
  int idle_timeout_s = 60;
  int read_timeout_s = 30;
  int sse_keepalive_ms = 10000;
  int64_t max_image_pixels = 32 << 20;
  int64_t image_cache_bytes = 256 << 20;  // encoded images kept for reuse; 0 = off
  int threads = 0;                        // CPU reference worker threads (ModelParams.threads)
  std::string backend = "cpu";            // ModelParams.backend: cpu | cuda
  EngineParams engine;
  // ModelParams.dspark: the draft module is loaded when the engine drafts with it.
  bool dspark() const {
    return engine.speculative_tokens > 0 && engine.speculative_method == "dspark";
  }
  // Tensor parallelism (docs/tp.md "Rank processes"); off while peer is empty.
  int rank = 0;         // 0: scheduler + HTTP; 1: follower, no HTTP
  std::string peer;     // the other rank's fabric address HOST[:PORT]
  std::string tp_bind;  // this rank's fabric address
  int tp_port = 29500;
  int tp_connect_timeout_ms = 60000;
  int tp_heartbeat_timeout_ms = 3000;

  // kInvalidArgument naming the flag and its environment variable, e.g.
  // "--port (DSV41_PORT) = 70000 must be in [0, 65535]".
  Status validate() const;
  // The model's TensorParallelParams (world 1 when peer is empty); settings = every engine
  // setting both ranks must share. Errors name the flag.
  Result<TensorParallelParams> tensor_parallel() const;
};

// The flag of a server tunable: "DSV41_MAX_BODY_BYTES" → "max-body-bytes".
std::string flag_of(const std::string& tunable);

struct ParsedArgs {
  ServerConfig config;
  bool help = false;
  std::vector<std::string> warnings;  // unknown DSV41_* variables and the like
};

// Environment first, then `--flag value`, `--flag=value`, or a bare `--flag` for booleans.
// Errors name the flag (unknown flag, missing value, unparsable value) and exit code 2 follows.
Result<ParsedArgs> parse_args(int argc, char** argv);

// --help text: one block per flag with its environment variable, default and meaning.
std::string help_text();

}  // namespace dsv41::server
