// The official openai Node SDK (the version pi-ai 0.73 pins) against the real engine on tiny8.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, KEY, MODEL } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer("--max-sequences", "2");
  client = new OpenAI({ baseURL: server.url, apiKey: KEY, maxRetries: 0, timeout: 120000 });
});
after(async () => assert.equal(await server.stop(), 0, server.log()));

const messages = [{ role: "user", content: "Hello, who are you?" }];

test("non-stream: message, finish reason, usage with cached_tokens", async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8,
                                                   temperature: 0, thinking: { type: "disabled" } });
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, "number");
  // A follow-up turn extends the first prompt: its shared part comes from the prefix cache.
  const again = await client.chat.completions.create({
    model: MODEL, messages: [...messages, { role: "assistant", content: "x" },
                             { role: "user", content: "more" }], max_tokens: 4, temperature: 0,
    thinking: { type: "disabled" } });
  assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));
});

test("stream: same text as non-stream, one id, finish then usage chunk", async () => {
  const body = { model: MODEL, messages, max_tokens: 10, temperature: 0,
                 thinking: { type: "disabled" } };
  const full = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true,
                                                        stream_options: { include_usage: true } });
  let text = "", ids = new Set(), finish = null, usage = null, roleChunks = 0;
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.choices.length === 0) { usage = chunk.usage; continue; }
    const c = chunk.choices[0];
    assert.equal(finish, null, "chunk after the finish chunk");
    if (c.delta.role) roleChunks++;
    text += c.delta.content ?? "";
    finish = c.finish_reason ?? null;
  }
  assert.equal(ids.size, 1);
  assert.equal(roleChunks, 1);
  assert.equal(text, full.choices[0].message.content);
  assert.equal(finish, full.choices[0].finish_reason);
  assert.ok(usage && usage.completion_tokens > 0);
});

test("tools accepted (auto), finish reason is one of stop/length/tool_calls", async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 6,
    tools: [{ type: "function", function: { name: "get_weather", description: "Weather",
              parameters: { type: "object", properties: { city: { type: "string" } },
                            required: ["city"] }, strict: false } }],
  });
  assert.ok(["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason));
  for (const call of r.choices[0].message.tool_calls ?? []) JSON.parse(call.function.arguments);
});

test("errors: 401, 404 unknown model, 400 naming the field, as APIError", async () => {
  const bad = new OpenAI({ baseURL: server.url, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: MODEL, messages }), (e) => {
    assert.equal(e.status, 401);
    assert.equal(e.type, "authentication_error");
    return e instanceof OpenAI.AuthenticationError;
  });
  await assert.rejects(client.chat.completions.create({ model: "nope", messages }), (e) => {
    assert.equal(e.status, 404);
    assert.match(e.message, /nope/);
    return e instanceof OpenAI.NotFoundError;
  });
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages, n: 2 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, "n");
    return e instanceof OpenAI.BadRequestError;
  });
});

test("abort: the stream stops and the engine request is cancelled", async () => {
  const ac = new AbortController();
  const stream = await client.chat.completions.create(
      { model: MODEL, messages, max_tokens: 100000, ignore_eos: true, stream: true },
      { signal: ac.signal });
  let n = 0;
  try {
    for await (const _ of stream) if (++n === 3) ac.abort();
  } catch (e) {
    assert.ok(e.name === "AbortError" || e instanceof OpenAI.APIUserAbortError, String(e));
  }
  assert.equal(n, 3, "the stream went on after abort()");
  const deadline = Date.now() + 60000;
  for (;;) {
    const text = await (await fetch(server.base + "/metrics")).text();
    const running = /^vllm:num_requests_running\S* (\S+)/m.exec(text);
    if (running && Number(running[1]) === 0) break;
    assert.ok(Date.now() < deadline, "aborted request still running");
    await new Promise((r) => setTimeout(r, 50));
  }
});

test("models list", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
});
