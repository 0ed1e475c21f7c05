// Request options → ResolvedOptions (see options.hpp; api-and-clients.md §2.8, §3.5).
#include "chat/options.hpp"

#include <utility>

#include "core/check.hpp"
#include "core/json_writer.hpp"

namespace dsv41::chat {

EffortValue EffortValue::of_name(std::string name) {
  EffortValue v;
  v.kind = Kind::kName;
  v.json = json::quote(name);
  v.name = std::move(name);
  return v;
}

EffortValue EffortValue::of_integer(int64_t value) {
  EffortValue v;
  v.kind = Kind::kInteger;
  v.integer = value;
  v.json = std::to_string(value);
  return v;
}

namespace {

int table_budget(const EffortTable& table, const std::string& name) {
  if (name == "low") return table.low;
  if (name == "high") return table.high;
  if (name == "xhigh") return table.xhigh;
  if (name == "max") return table.max;
  return 0;
}

std::string accepted_names(const EffortTable& table) {
  std::string out;
  for (const char* name : {"low", "high", "xhigh", "max"}) {
    if (table_budget(table, name) == 0) continue;
    out += out.empty() ? "" : ", ";
    out += name;
  }
  return out;
}

}  // namespace

int resolve_effort_budget(const EffortValue& effort, const EffortTable& table) {
  int budget = 0;
  switch (effort.kind) {
    case EffortValue::Kind::kAbsent:
      budget = table.high;
      break;
    case EffortValue::Kind::kName:
      budget = table_budget(table, effort.name);
      break;
    case EffortValue::Kind::kInteger:
      budget = effort.integer >= 1 && effort.integer <= 100 ? static_cast<int>(effort.integer) : 0;
      break;
    case EffortValue::Kind::kOther:
      break;
  }
  DSV41_CHECK(budget != 0, kInvalidArgument,
              "invalid reasoning effort {}: expected an integer in [1, 100] or one of {}",
              effort.json, accepted_names(table));
  return budget;
}

ResolvedOptions resolve_options(const RequestOptions& request, bool has_tools,
                                const EffortTable& table) {
  ResolvedOptions out;
  // chat_template_kwargs is the more specific source and wins over the top-level field.
  EffortValue effort = request.kwargs_effort.kind != EffortValue::Kind::kAbsent
                           ? request.kwargs_effort
                           : request.effort;
  bool chat_by_effort = false;
  if (effort.kind == EffortValue::Kind::kName) {
    if (effort.name == "none") {
      chat_by_effort = true;
      effort = EffortValue{};
    } else if (effort.name == "minimal") {
      effort.name = "low";
    } else if (effort.name == "medium") {
      effort.name = "high";
    }
  }
  out.thinking =
      !chat_by_effort && request.thinking.value_or(true) && request.kwargs_thinking.value_or(true);
  const int budget = resolve_effort_budget(effort, table);  // validated in both modes
  out.effort_budget = out.thinking ? budget : 0;
  out.drop_thinking = request.drop_thinking.value_or(true);
  out.tool_choice =
      request.tool_choice.value_or(has_tools ? ToolChoiceKind::kAuto : ToolChoiceKind::kNone);
  out.tool_choice_name = request.tool_choice_name;
  DSV41_CHECK(has_tools || (out.tool_choice != ToolChoiceKind::kRequired &&
                            out.tool_choice != ToolChoiceKind::kNamed),
              kInvalidArgument, "tool_choice: requires a tool call but the request has no tools");
  out.include_reasoning = request.include_reasoning;
  return out;
}

}  // namespace dsv41::chat
