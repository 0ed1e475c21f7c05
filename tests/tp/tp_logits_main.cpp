// dsv41_tp_logits: the logits of the tiny golden prompts through the public Session API, as one
// process or as one rank of a TP pair (tests/tp/tp_netns_test.py runs the pair in two network
// namespaces). Runs, in order: prompt0..2 one-shot, prompt1 in chunks 16/16/5, decode.input_ids
// as prefill + single-token steps, then a fork of the decode session rolled back 4 positions and
// re-fed (exercising the follower's fork / rollback). Rank 0 (or world 1) writes every row of
// logits as raw little-endian fp32 to OUT; rank 1 only follows.
//   dsv41_tp_logits MODEL_DIR OUT                      (one process)
//   dsv41_tp_logits MODEL_DIR OUT RANK BIND PEER PORT  (one TP rank)
//   dsv41_tp_logits --compare A B VOCAB TOL            (two outputs: max |diff| <= TOL and the
//                                                       same argmax on every row, else exit 1)
// The backend is DSV41_BACKEND's (scripts/gpu-tp-test.sh runs it with cuda, one GPU per rank).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dsv41/model.hpp"
#include "dsv41/session.hpp"
#include "loader/safetensors.hpp"

using namespace dsv41;

namespace {

std::vector<int32_t> ids_of(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find_info(name);
  if (info == nullptr) {
    std::fprintf(stderr, "dsv41_tp_logits: golden tensor %s missing\n", name.c_str());
    std::exit(2);
  }
  std::vector<float> v = tensor_to_f32(f.view(*info));
  return std::vector<int32_t>(v.begin(), v.end());
}

template <typename T>
T check(Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "dsv41_tp_logits: %s: %s\n", what, r.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

std::vector<float> read_floats(const char* path) {
  std::vector<float> v;
  FILE* f = std::fopen(path, "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "dsv41_tp_logits: cannot read %s\n", path);
    std::exit(2);
  }
  float x;
  while (std::fread(&x, sizeof x, 1, f) == 1) v.push_back(x);
  std::fclose(f);
  return v;
}

int compare(const char* a_path, const char* b_path, long vocab, double tol) {
  const std::vector<float> a = read_floats(a_path), b = read_floats(b_path);
  if (vocab < 1 || a.size() != b.size() || a.empty() || a.size() % vocab != 0) {
    std::fprintf(stderr, "dsv41_tp_logits: %s has %zu floats, %s %zu (vocab %ld)\n", a_path,
                 a.size(), b_path, b.size(), vocab);
    return 1;
  }
  double worst = 0;
  size_t worst_at = 0, argmax_diff = 0;
  const size_t rows = a.size() / vocab;
  for (size_t r = 0; r < rows; ++r) {
    size_t ia = 0, ib = 0;
    for (size_t c = 0; c < static_cast<size_t>(vocab); ++c) {
      const size_t i = r * vocab + c;
      const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
      if (!(d <= worst)) worst = d, worst_at = i;  // NaN counts as worst
      if (a[i] > a[r * vocab + ia]) ia = c;
      if (b[i] > b[r * vocab + ib]) ib = c;
    }
    argmax_diff += ia != ib;
  }
  std::printf(
      "%zu rows: max |diff| %.3g at row %zu column %zu (tolerance %.3g), %zu rows with "
      "a different argmax\n",
      rows, worst, worst_at / vocab, worst_at % vocab, tol, argmax_diff);
  return worst <= tol && argmax_diff == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--compare")
    return compare(argv[2], argv[3], std::atol(argv[4]), std::atof(argv[5]));
  if (argc != 3 && argc != 7) {
    std::fprintf(stderr,
                 "usage: dsv41_tp_logits MODEL_DIR OUT [RANK BIND PEER PORT]\n"
                 "       dsv41_tp_logits --compare A B VOCAB TOL\n");
    return 2;
  }
  const std::string dir = argv[1];
  ModelParams mp;
  mp.model_dir = dir;
  mp.threads = 1;
  if (argc == 7) {
    mp.tp.world = 2;
    mp.tp.rank = std::atoi(argv[3]);
    mp.tp.bind_address = argv[4];
    mp.tp.peer_address = argv[5];
    mp.tp.port = static_cast<uint16_t>(std::atoi(argv[6]));
    mp.tp.connect_timeout_ms = 30000;
  }
  Model model = check(Model::load(mp), "load");
  if (mp.tp.world == 2 && mp.tp.rank == 1) {
    Status s = model.run_tp_follower();
    if (!s.is_ok()) std::fprintf(stderr, "dsv41_tp_logits: follower: %s\n", s.to_string().c_str());
    return s.is_ok() ? 0 : 1;
  }
  std::unique_ptr<SafetensorsFile> golden = SafetensorsFile::open(dir + "/golden.safetensors");
  std::vector<float> out;
  auto run = [&](Session& s, const std::vector<int32_t>& ids, std::vector<size_t> chunks) {
    size_t at = 0;
    for (size_t c : chunks) {
      std::vector<float> l =
          check(s.append(std::span<const int32_t>(ids.data() + at, c), true), "append");
      out.insert(out.end(), l.begin(), l.end());
      at += c;
    }
  };
  for (int p = 0; p < 3; ++p) {
    Session s = check(Session::create(model), "session");
    const auto ids = ids_of(*golden, "prompt" + std::to_string(p) + ".input_ids");
    run(s, ids, {ids.size()});
  }
  const auto p1 = ids_of(*golden, "prompt1.input_ids");
  Session chunked = check(Session::create(model), "session");
  run(chunked, p1, {16, 16, 5});
  const auto dec = ids_of(*golden, "decode.input_ids");
  Session decode = check(Session::create(model), "session");
  std::vector<size_t> steps{p1.size()};
  steps.resize(1 + dec.size() - p1.size(), 1);
  run(decode, dec, steps);
  Session forked = check(decode.fork(), "fork");
  if (Status s = forked.rollback(4); !s.is_ok()) {
    std::fprintf(stderr, "dsv41_tp_logits: rollback: %s\n", s.to_string().c_str());
    return 1;
  }
  run(forked, std::vector<int32_t>(dec.end() - 4, dec.end()), {1, 1, 1, 1});
  FILE* f = std::fopen(argv[2], "wb");
  if (f == nullptr || std::fwrite(out.data(), sizeof(float), out.size(), f) != out.size()) {
    std::fprintf(stderr, "dsv41_tp_logits: cannot write %s\n", argv[2]);
    return 1;
  }
  std::fclose(f);
  std::printf("%zu logits rows written\n",
              out.size() / static_cast<size_t>(model.info().vocab_size));
  return 0;
}
