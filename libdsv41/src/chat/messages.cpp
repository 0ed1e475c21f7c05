// Role names (see messages.hpp).
#include "chat/messages.hpp"

namespace dsv41::chat {

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kDeveloper:
      return "developer";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kTool:
      return "tool";
    case Role::kLatestReminder:
      return "latest_reminder";
  }
  return "?";
}

}  // namespace dsv41::chat
