// DSML tag reading helpers (see dsml_tag.hpp).
#include "chat/dsml_tag.hpp"

#include "chat/markers.hpp"

namespace dsv41::chat {

namespace {

// The value of attr="..." inside a tag body, if present.
bool find_attribute(std::string_view body, std::string_view attr, std::string& value) {
  size_t from = 0;
  while (true) {
    const size_t pos = body.find(attr, from);
    if (pos == std::string_view::npos) return false;
    const size_t eq = pos + attr.size();
    const bool boundary =
        pos == 0 || body[pos - 1] == ' ' || body[pos - 1] == '\t' || body[pos - 1] == '\n';
    if (boundary && body.substr(eq, 2) == "=\"") {
      const size_t start = eq + 2;
      const size_t end = body.find('"', start);
      value = std::string(
          body.substr(start, end == std::string_view::npos ? body.size() - start : end - start));
      return true;
    }
    from = pos + 1;
  }
}

}  // namespace

DsmlTag classify_dsml_tag(std::string_view tag) {
  DsmlTag out;
  out.closing = tag.substr(0, markers::kDsmlTagClose.size()) == markers::kDsmlTagClose;
  std::string_view body =
      tag.substr(out.closing ? markers::kDsmlTagClose.size() : markers::kDsmlTagOpen.size());
  if (!body.empty() && body.back() == '>') body.remove_suffix(1);
  while (!body.empty() && body.front() == ' ') body.remove_prefix(1);
  size_t word_end = 0;
  while (word_end < body.size() &&
         ((body[word_end] >= 'a' && body[word_end] <= 'z') || body[word_end] == '_'))
    ++word_end;
  const std::string_view word = body.substr(0, word_end);
  const std::string_view rest = body.substr(word_end);
  const bool bare = rest.find_first_not_of(" \t\n") == std::string_view::npos;
  if ((word == "calls" || word == "tool_calls" || word == "function_calls") && bare) {
    out.kind = DsmlTag::Kind::kCalls;
  } else if (word == "invoke" && (out.closing ? bare : !rest.empty())) {
    out.kind = DsmlTag::Kind::kInvoke;
  } else if (word == "parameter" && (out.closing ? bare : !rest.empty())) {
    out.kind = DsmlTag::Kind::kParameter;
  }
  if (!out.closing && out.kind != DsmlTag::Kind::kUnknown) {
    out.has_name = find_attribute(rest, "name", out.name);
    find_attribute(rest, "string", out.string_flag);
  }
  return out;
}

size_t partial_marker_suffix(std::string_view text,
                             std::initializer_list<std::string_view> markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    const size_t max_len = std::min(text.size(), m.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (text.substr(text.size() - len) == m.substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

size_t utf8_complete_prefix(std::string_view text) {
  const size_t n = text.size();
  // Walk back over at most 3 continuation bytes to the lead byte of the last sequence.
  size_t back = 0;
  while (back < 3 && back < n && (static_cast<unsigned char>(text[n - 1 - back]) & 0xC0) == 0x80)
    ++back;
  if (back == n) return n;
  const auto lead = static_cast<unsigned char>(text[n - 1 - back]);
  size_t need = 1;
  if ((lead & 0xE0) == 0xC0) {
    need = 2;
  } else if ((lead & 0xF0) == 0xE0) {
    need = 3;
  } else if ((lead & 0xF8) == 0xF0) {
    need = 4;
  }
  return back + 1 < need ? n - 1 - back : n;
}

MarkerHit find_first_marker(std::string_view text, std::initializer_list<std::string_view> markers,
                            size_t from) {
  MarkerHit hit;
  for (std::string_view m : markers) {
    const size_t pos = text.find(m, from);
    if (pos == std::string_view::npos) continue;
    if (pos < hit.pos || (pos == hit.pos && m.size() > hit.marker.size())) {
      hit.pos = pos;
      hit.marker = m;
    }
  }
  return hit;
}

}  // namespace dsv41::chat
