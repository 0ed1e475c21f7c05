// Pi's own request builder and stream parser (@mariozechner/pi-ai, provider openai-completions)
// and the AI SDK's strict stream validation (@ai-sdk/openai-compatible + ai, as opencode uses).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { complete } from "@mariozechner/pi-ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { streamText, generateText } from "ai";
import { startServer, KEY, MODEL } from "./server.mjs";

let server;
before(async () => { server = await startServer(); });
after(async () => assert.equal(await server.stop(), 0, server.log()));

function piModel(extra = {}) {
  return { id: MODEL, name: MODEL, api: "openai-completions", provider: "dsv41",
           baseUrl: server.url, reasoning: true, input: ["text"],
           cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 2048,
           maxTokens: 8, compat: { supportsDeveloperRole: false, supportsStore: false }, ...extra };
}

test("pi-ai: streamed turn with reasoning effort and tools ends cleanly with usage", async () => {
  const msg = await complete(piModel(), {
    systemPrompt: "You are terse.",
    messages: [{ role: "user", content: "Hello", timestamp: Date.now() }],
    tools: [{ name: "read", description: "Read a file",
              parameters: { type: "object", properties: { path: { type: "string" } },
                            required: ["path"] } }],
  }, { apiKey: KEY, maxTokens: 8, reasoningEffort: "high" });
  assert.notEqual(msg.stopReason, "error", msg.errorMessage);
  assert.ok(["stop", "length", "toolUse"].includes(msg.stopReason), msg.stopReason);
  assert.ok(msg.usage.input > 0, JSON.stringify(msg.usage));
  assert.ok(msg.usage.output > 0, JSON.stringify(msg.usage));
});

test("pi-ai: wrong key is an error turn, not a crash", async () => {
  const msg = await complete(piModel(), {
    messages: [{ role: "user", content: "Hello", timestamp: Date.now() }],
  }, { apiKey: "wrong", maxTokens: 4 });
  assert.equal(msg.stopReason, "error");
  assert.match(msg.errorMessage ?? "", /401|key|auth/i);
});

test("ai-sdk openai-compatible: strict stream parsing, text and finish reason", async () => {
  const provider = createOpenAICompatible({ name: "dsv41", baseURL: server.url, apiKey: KEY,
                                            includeUsage: true });
  const result = streamText({ model: provider(MODEL), prompt: "Hello", maxOutputTokens: 8,
                              temperature: 0 });
  const errors = [];
  let text = "";
  for await (const part of result.fullStream) {
    if (part.type === "error") errors.push(part.error);
    if (part.type === "text-delta") text += part.text ?? part.delta ?? "";
  }
  assert.deepEqual(errors, []);
  assert.ok(["stop", "length"].includes(await result.finishReason));
  const usage = await result.usage;
  assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0, JSON.stringify(usage));
  const full = await generateText({ model: provider(MODEL), prompt: "Hello", maxOutputTokens: 8,
                                    temperature: 0 });
  assert.equal(typeof full.text, "string");
});
