// chat: an interactive chat on the terminal. Each turn renders the whole conversation with the
// DeepSeek-V4.1 chat encoder, generates through the Engine, and splits the streamed text into
// reasoning, content and tool calls with the incremental output parser.
//   dsv41_example_chat MODEL_DIR [--no-thinking] [--max-tokens N]   (reads user turns from stdin)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <string>

#include "chat/options.hpp"
#include "chat/output_parser.hpp"
#include "chat/prompt_renderer.hpp"
#include "chat/request_json.hpp"
#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"

using namespace dsv41;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [--no-thinking] [--max-tokens N]\n", argv[0]);
    return 2;
  }
  bool thinking = true;
  int64_t max_tokens = 256;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-thinking")) thinking = false;
    else if (!std::strcmp(argv[i], "--max-tokens") && i + 1 < argc) max_tokens = std::atoll(argv[++i]);
  }
  ModelParams mp;
  mp.model_dir = argv[1];
  auto model = Model::load(mp);
  if (!model) {
    std::fprintf(stderr, "load: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto engine = Engine::create(*model);
  if (!engine) {
    std::fprintf(stderr, "engine: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  chat::ChatRequest conversation;
  conversation.options.thinking = thinking;
  conversation.messages.push_back(chat::ChatMessage{});  // system prompt
  conversation.messages.back().role = chat::Role::kSystem;
  conversation.messages.back().text = "You are a helpful assistant.";
  std::string line;
  while (std::printf("> "), std::fflush(stdout), std::getline(std::cin, line)) {
    chat::ChatMessage user;
    user.role = chat::Role::kUser;
    user.text = line;
    conversation.messages.push_back(user);
    chat::ResolvedOptions resolved;
    auto rendered = [&]() -> Result<chat::RenderedPrompt> {
      Result<chat::RenderedPrompt> out = Status(ErrorCode::kInternal, "not rendered");
      try {
        resolved = chat::resolve_options(conversation.options, false, chat::EffortTable::release());
        out = chat::render_request(conversation, resolved);
      } catch (const std::exception& e) {
        out = Status(ErrorCode::kInvalidArgument, e.what());
      }
      return out;
    }();
    if (!rendered) {
      std::fprintf(stderr, "render: %s\n", rendered.status().to_string().c_str());
      return 1;
    }
    auto ids = model->tokenize(rendered->text, /*parse_special=*/true);
    if (!ids) {
      std::fprintf(stderr, "tokenize: %s\n", ids.status().to_string().c_str());
      return 1;
    }
    GenerationRequest req;
    req.prompt = *ids;
    req.stop.max_tokens = max_tokens;
    req.sampling.temperature = 0.6f;
    req.sampling.top_p = 0.95f;
    chat::OutputParser parser(chat::ParserOptions{resolved.thinking, 1});
    chat::ChatMessage answer;
    answer.role = chat::Role::kAssistant;
    answer.text = std::string();
    answer.reasoning_content = std::string();
    std::promise<Status> done;
    auto print = [&](const std::vector<chat::ParseEvent>& events) {
      for (const auto& ev : events) {
        if (ev.kind == chat::ParseEvent::Kind::kReasoning) {
          *answer.reasoning_content += ev.text;
          std::printf("\033[2m%s\033[0m", ev.text.c_str());  // reasoning dimmed
        }
        if (ev.kind == chat::ParseEvent::Kind::kContent) {
          *answer.text += ev.text;
          std::fputs(ev.text.c_str(), stdout);
        }
        if (ev.kind == chat::ParseEvent::Kind::kToolCallStart)
          std::printf("\n[tool call %s]", ev.name.c_str());
      }
      std::fflush(stdout);
    };
    auto id = engine->submit(req, [&](const GenerationEvent& ev) {
      std::vector<chat::ParseEvent> events;
      parser.feed(ev.text, events);
      if (ev.kind == GenerationEvent::Kind::kFinished) parser.finish(events);
      print(events);
      if (ev.kind == GenerationEvent::Kind::kFinished) done.set_value(ev.status);
    });
    if (!id) {
      std::fprintf(stderr, "submit: %s\n", id.status().to_string().c_str());
      return 1;
    }
    Status st = done.get_future().get();
    std::printf("\n");
    if (!st.is_ok()) {
      std::fprintf(stderr, "generation: %s\n", st.to_string().c_str());
      return 1;
    }
    conversation.messages.push_back(answer);
  }
  return 0;
}
