#include "scripted_backend.hpp"

namespace dsv41::server::test {

Result<std::vector<int32_t>> ScriptedBackend::tokenize(std::string_view text, bool) const {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

Result<std::string> ScriptedBackend::detokenize(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += static_cast<char>(id);
  return out;
}

Result<RequestId> ScriptedBackend::submit(GenerationRequest request, EventCallback on_event) {
  std::lock_guard<std::mutex> lock(mu_);
  last_ = request;
  const RequestId id = next_id_++;
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  const int64_t limit = request.stop.max_tokens;
  threads_.emplace_back([this, id, prompt, limit, cb = std::move(on_event)] {
    GenerationEvent ev;
    ev.id = id;
    ev.prompt_tokens = prompt;
    int64_t n = 0;
    for (const std::string& piece : pieces_) {
      if (cancelled_) break;
      ev.kind = GenerationEvent::Kind::kToken;
      ev.token = static_cast<int32_t>(n % 256);
      ev.text = piece;
      ev.completion_tokens = ++n;
      cb(ev);
      if (limit != kNoTokenLimit && n >= limit) break;
    }
    ev.kind = GenerationEvent::Kind::kFinished;
    ev.text.clear();
    ev.finish = (limit != kNoTokenLimit && n >= limit) ? FinishReason::kLength : FinishReason::kStop;
    if (cancelled_) {
      ev.finish = FinishReason::kNone;
      ev.status = Status(ErrorCode::kCancelled, "cancelled");
    }
    cb(ev);
  });
  return id;
}

Status ScriptedBackend::cancel(RequestId) {
  cancelled_ = true;
  return Status::ok();
}

void ScriptedBackend::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

GenerationRequest ScriptedBackend::last_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

std::vector<std::string> split_utf8(const std::string& text, size_t n) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = std::min(text.size(), i + n);
    while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) ++j;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace dsv41::server::test
