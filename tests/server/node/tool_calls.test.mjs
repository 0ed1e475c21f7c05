// Streamed tool-call and reasoning deltas through real clients against the REAL tiny model.
// The random model never writes DSML by itself, so tool calls use constrained tool_choice
// (required / named, docs/server.md); reasoning comes from thinking mode (the prompt ends in
// <think>, so the model's text is reasoning until </think>).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { complete } from "@mariozechner/pi-ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { streamText, jsonSchema, tool } from "ai";
import { startServer, KEY, MODEL } from "./server.mjs";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.url, apiKey: KEY });
});
after(async () => assert.equal(await server.stop(), 0, server.log()));

const TOOLS = [
  { type: "function", function: { name: "read", description: "Read a file",
    parameters: { type: "object", properties: { path: { type: "string" } } } } },
  { type: "function", function: { name: "write", description: "Write a file",
    parameters: { type: "object", properties: { path: { type: "string" } } } } },
];
const NAMES = ["read", "write"];
const MESSAGES = [{ role: "user", content: "Read the file README.md" }];

function assertCall(call, names) {
  assert.ok(names.includes(call.function.name), JSON.stringify(call));
  assert.match(call.id, /^call_/);
  const args = JSON.parse(call.function.arguments);
  assert.equal(typeof args, "object");
  assert.ok(args !== null && !Array.isArray(args), call.function.arguments);
}

test("openai: streamed tool-call fragments accumulate to a valid call (required)", async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages: MESSAGES, tools: TOOLS, tool_choice: "required", stream: true,
    max_tokens: 400, temperature: 1, seed: 3,
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const tc of c.delta.tool_calls ?? []) {
      if (!calls[tc.index]) {
        assert.ok(tc.id && tc.function?.name, "first fragment has id and name: " +
                  JSON.stringify(tc));
        calls[tc.index] = { id: tc.id, type: "function",
                            function: { name: tc.function.name, arguments: "" } };
      } else {
        // continuation fragments: no null id / name (strict clients reject them)
        assert.notEqual(tc.id, null, JSON.stringify(tc));
        assert.notEqual(tc.function?.name, null, JSON.stringify(tc));
      }
      calls[tc.index].function.arguments += tc.function?.arguments ?? "";
    }
    finish = c.finish_reason ?? finish;
  }
  assert.equal(finish, "tool_calls");
  assert.equal(calls.length, 1);
  assertCall(calls[0], NAMES);
});

test("openai: stream helper's final completion has the named call", async () => {
  const runner = client.chat.completions.stream({
    model: MODEL, messages: MESSAGES, tools: TOOLS, max_tokens: 400, temperature: 0,
    tool_choice: { type: "function", function: { name: "write" } },
  });
  const final = await runner.finalChatCompletion();
  const choice = final.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.tool_calls.length, 1);
  assertCall(choice.message.tool_calls[0], ["write"]);
});

test("openai: reasoning_content deltas arrive before any content (thinking mode)", async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: "user", content: "Think about it." }], stream: true,
    max_tokens: 24, temperature: 0, reasoning_effort: "high",
  });
  const order = [];
  let reasoning = "";
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.reasoning_content) { order.push("r"); reasoning += d.reasoning_content; }
    if (d.content) order.push("c");
  }
  assert.ok(reasoning.length > 0, "no reasoning_content deltas");
  assert.equal(order[0], "r");
  const firstContent = order.indexOf("c");
  if (firstContent >= 0) assert.ok(!order.slice(firstContent).includes("r"), order.join(""));
});

test("pi-ai: constrained tool call comes back as a toolCall with parsed arguments", async () => {
  const msg = await complete({
    id: MODEL, name: MODEL, api: "openai-completions", provider: "dsv41", baseUrl: server.url,
    reasoning: true, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 2048, maxTokens: 400,
    compat: { supportsDeveloperRole: false, supportsStore: false },
  }, {
    messages: [{ role: "user", content: "Read README.md", timestamp: Date.now() }],
    tools: TOOLS.map((t) => ({ name: t.function.name, description: t.function.description,
                               parameters: t.function.parameters })),
  }, { apiKey: KEY, maxTokens: 400, reasoningEffort: "high", toolChoice: "required" });
  assert.notEqual(msg.stopReason, "error", msg.errorMessage);
  assert.equal(msg.stopReason, "toolUse");
  const calls = msg.content.filter((b) => b.type === "toolCall");
  assert.equal(calls.length, 1, JSON.stringify(msg.content));
  assert.ok(NAMES.includes(calls[0].name), calls[0].name);
  assert.equal(typeof calls[0].arguments, "object");
  assert.ok(calls[0].id);
});

test("ai-sdk openai-compatible: strict stream parsing of a constrained tool call", async () => {
  const provider = createOpenAICompatible({ name: "dsv41", baseURL: server.url, apiKey: KEY,
                                            includeUsage: true });
  const schema = jsonSchema({ type: "object", properties: { path: { type: "string" } } });
  const result = streamText({
    model: provider(MODEL), prompt: "Read README.md", maxOutputTokens: 400, temperature: 1,
    seed: 4, tools: { read: tool({ description: "Read a file", inputSchema: schema }),
                      write: tool({ description: "Write a file", inputSchema: schema }) },
    toolChoice: { type: "tool", toolName: "read" },
  });
  const errors = [];
  const calls = [];
  let deltas = 0;
  for await (const part of result.fullStream) {
    if (part.type === "error" || part.type === "tool-error") errors.push(part.error);
    if (part.type === "tool-input-delta") deltas++;
    if (part.type === "tool-call") calls.push(part);
  }
  assert.deepEqual(errors, []);
  assert.equal(await result.finishReason, "tool-calls");
  assert.equal(calls.length, 1);
  assert.equal(calls[0].toolName, "read");
  assert.equal(typeof calls[0].input, "object");
  assert.ok(deltas >= 1, "no tool-input-delta parts");
});
