// JsonSchemaTracker (see json_schema_tracker.hpp).
#include "sampling/json_schema_tracker.hpp"

namespace dsv41::sampling {

namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

uint64_t all_bits(size_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

}  // namespace

bool JsonSchemaTracker::feed(uint8_t c) {
  const JsonSchemaTracker saved = *this;
  const std::string_view one(reinterpret_cast<const char*>(&c), 1);
  if (feed(one)) return true;
  *this = saved;
  return false;
}

bool JsonSchemaTracker::feed(std::string_view bytes) {
  for (char ch : bytes) {
    const auto c = static_cast<uint8_t>(ch);
    bool ok = false;
    switch (mode_) {
      case Mode::kDone:
        ok = is_ws(c);
        break;
      case Mode::kValue:
        ok = is_ws(c) || start_value(c);
        break;
      case Mode::kOpenObject:
      case Mode::kKey: {
        if (is_ws(c)) {
          ok = true;
          break;
        }
        const Frame& f = stack_[depth_ - 1];
        const JsonSchemaNode& n = node(f.node);
        if (c == '"') {
          candidates_ = all_bits(n.keys.size()) & ~f.seen;
          offset_ = 0, escape_ = false;
          mode_ = Mode::kKeyString;
          ok = candidates_ != 0;
        } else if (c == '}' && mode_ == Mode::kOpenObject && n.required == 0) {
          --depth_;
          ok = end_value();
        }
        break;
      }
      case Mode::kKeyString:
        ok = match_string_byte(c, true);
        break;
      case Mode::kColon:
        if (c == ':') mode_ = Mode::kValue;
        ok = is_ws(c) || c == ':';
        break;
      case Mode::kEnum:
        ok = match_string_byte(c, false);
        break;
      case Mode::kString:
        ok = true;
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          ok = end_value();
        }
        break;
      case Mode::kNumber:
        if ((c >= '0' && c <= '9') || c == '+' || c == '-') {
          ok = true;
        } else if (c == '.' || c == 'e' || c == 'E') {
          ok = !integer_;
        } else {  // the number ended on c: its container takes c
          ok = end_value() && feed(std::string_view(&ch, 1));
        }
        break;
      case Mode::kLiteral:
        ok = true;
        if (--literal_left_ == 0) ok = end_value();
        break;
      case Mode::kOpenArray: {
        if (is_ws(c)) {
          ok = true;
          break;
        }
        Frame& f = stack_[depth_ - 1];
        const JsonSchemaNode& n = node(f.node);
        if (c == ']') {
          if (n.min_items == 0) {
            --depth_;
            ok = end_value();
          }
        } else if (n.max_items != 0) {
          ++f.count;
          node_ = n.items;
          ok = start_value(c);
        }
        break;
      }
      case Mode::kAfterValue:
        ok = after_value(c);
        break;
      case Mode::kFree:
        ok = free_byte(c);
        break;
    }
    if (!ok) return false;
  }
  return true;
}

bool JsonSchemaTracker::start_value(uint8_t c) {
  const bool any = node_ < 0 || node(node_).types == 0;
  const uint8_t types = any ? 0xFF : node(node_).types;
  auto free_value = [&] {
    free_depth_ = (c == '{' || c == '[') ? 1 : 0;
    free_string_ = c == '"';
    free_scalar_ = !free_string_ && free_depth_ == 0;
    escape_ = false;
    mode_ = Mode::kFree;
    return true;
  };
  if (any) return free_value();
  const JsonSchemaNode& n = node(node_);
  switch (c) {
    case '{':
    case '[': {
      const bool object = c == '{';
      if ((types & (object ? JsonSchemaNode::kObject : JsonSchemaNode::kArray)) == 0) return false;
      if (object ? n.any_object : n.any_array) return free_value();
      if (depth_ >= stack_.size()) return false;
      stack_[depth_++] = Frame{0, node_, 0, object};
      mode_ = object ? Mode::kOpenObject : Mode::kOpenArray;
      return true;
    }
    case '"':
      if ((types & JsonSchemaNode::kString) == 0) return false;
      escape_ = false;
      offset_ = 0;
      candidates_ = all_bits(n.enum_strings.size());
      mode_ = n.enum_strings.empty() ? Mode::kString : Mode::kEnum;
      return true;
    case 't':
    case 'f':
      if ((types & JsonSchemaNode::kBoolean) == 0) return false;
      literal_left_ = c == 't' ? 3 : 4;
      mode_ = Mode::kLiteral;
      return true;
    case 'n':
      if ((types & JsonSchemaNode::kNull) == 0) return false;
      literal_left_ = 3;
      mode_ = Mode::kLiteral;
      return true;
    default:
      if (c != '-' && (c < '0' || c > '9')) return false;
      if ((types & (JsonSchemaNode::kNumber | JsonSchemaNode::kInteger)) == 0) return false;
      integer_ = (types & JsonSchemaNode::kNumber) == 0;
      mode_ = Mode::kNumber;
      return true;
  }
}

bool JsonSchemaTracker::end_value() {
  mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
  return true;
}

bool JsonSchemaTracker::after_value(uint8_t c) {
  if (is_ws(c)) return true;
  Frame& f = stack_[depth_ - 1];
  const JsonSchemaNode& n = node(f.node);
  if (f.object) {
    if (c == ',') {  // only when a key is left to write (else the object could never go on)
      mode_ = Mode::kKey;
      return (all_bits(n.keys.size()) & ~f.seen) != 0;
    }
    if (c != '}' || (f.seen & n.required) != n.required) return false;
  } else {
    if (c == ',') {
      if (n.max_items >= 0 && static_cast<int64_t>(f.count) >= n.max_items) return false;
      ++f.count;
      node_ = n.items;
      mode_ = Mode::kValue;
      return true;
    }
    if (c != ']' || static_cast<int64_t>(f.count) < n.min_items) return false;
  }
  --depth_;
  return end_value();
}

bool JsonSchemaTracker::match_string_byte(uint8_t c, bool keys) {
  const JsonSchemaNode& n = keys ? node(stack_[depth_ - 1].node) : node(node_);
  const std::vector<std::string>& list = keys ? n.keys : n.enum_strings;
  if (!escape_ && c == '"') {  // the closing quote: a candidate must end here
    for (size_t i = 0; i < list.size(); ++i) {
      if ((candidates_ >> i & 1) == 0 || list[i].size() != offset_) continue;
      if (!keys) return end_value();
      stack_[depth_ - 1].seen |= uint64_t{1} << i;
      node_ = n.key_nodes[i];
      mode_ = Mode::kColon;
      return true;
    }
    return false;
  }
  uint64_t next = 0;
  for (size_t i = 0; i < list.size(); ++i)
    if ((candidates_ >> i & 1) != 0 && list[i].size() > offset_ &&
        static_cast<uint8_t>(list[i][offset_]) == c)
      next |= uint64_t{1} << i;
  if (next == 0) return false;
  candidates_ = next;
  ++offset_;
  escape_ = !escape_ && c == '\\';
  return true;
}

bool JsonSchemaTracker::free_byte(uint8_t c) {
  if (free_string_) {
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      free_string_ = false;
      if (free_depth_ == 0) return end_value();
    }
    return true;
  }
  if (free_scalar_) {  // a number or literal at the top of the free value
    if (c == ',' || c == '}' || c == ']' || is_ws(c)) {
      free_scalar_ = false;
      const char ch = static_cast<char>(c);
      return end_value() && feed(std::string_view(&ch, 1));
    }
    return true;
  }
  if (c == '"') {
    free_string_ = true;
  } else if (c == '{' || c == '[') {
    ++free_depth_;
  } else if (c == '}' || c == ']') {
    if (--free_depth_ == 0) return end_value();
  }
  return true;
}

std::bitset<256> JsonSchemaTracker::next_bytes() const {
  std::bitset<256> out;
  if (mode_ != Mode::kKeyString && mode_ != Mode::kEnum) return out.set();
  const bool keys = mode_ == Mode::kKeyString;
  const JsonSchemaNode& n = keys ? node(stack_[depth_ - 1].node) : node(node_);
  const std::vector<std::string>& list = keys ? n.keys : n.enum_strings;
  for (size_t i = 0; i < list.size(); ++i) {
    if ((candidates_ >> i & 1) == 0) continue;
    if (list[i].size() > offset_) out.set(static_cast<uint8_t>(list[i][offset_]));
    if (list[i].size() == offset_ && !escape_) out.set('"');
  }
  return out;
}

}  // namespace dsv41::sampling
