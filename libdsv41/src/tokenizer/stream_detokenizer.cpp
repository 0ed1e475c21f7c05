#include "core/check.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace dsv41 {

std::string StreamDetokenizer::push(int32_t id) {
  pending_ += tok_->token_bytes(id);
  std::string out;
  const size_t used = utf8::append_lossy(pending_, out, /*hold_incomplete=*/true);
  pending_.erase(0, used);
  return out;
}

std::string StreamDetokenizer::flush() {
  std::string out = utf8::lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace dsv41
