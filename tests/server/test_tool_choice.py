"""Constrained tool_choice on the REAL tiny model (ctest `server:tool_choice`, label server).

    python3 tests/server/test_tool_choice.py SERVER_BINARY MODEL_DIR

The random tiny model never writes DSML by itself; tool_choice required / named forces a call
(docs/server.md "Constrained tool_choice"): finish_reason tool_calls, a declared name, arguments
that parse as a JSON object, in the non-stream message and in the accumulated stream deltas.
"""
import json
import sys
import unittest

from server_harness import Server, parse_sse

BINARY = MODEL = None
KEY = "test-key-0123456789"
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Time in a zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}},
]
NAMES = {"get_weather", "get_time"}


def body(**over):
    b = {"model": "deepseek-v4.1-flash", "max_tokens": 400, "tools": TOOLS,
         "messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    b.update(over)
    return b


class ToolChoiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(BINARY, MODEL, "--max-context", "4096", key=KEY)

    @classmethod
    def tearDownClass(cls):
        rc = cls.s.stop()
        assert rc == 0, f"exit code {rc}\n" + "".join(cls.s.log)

    def check_call(self, call, names):
        self.assertIn(call["function"]["name"], names)
        self.assertTrue(call["id"].startswith("call_"), call)
        self.assertEqual(call["type"], "function")
        args = json.loads(call["function"]["arguments"])
        self.assertIsInstance(args, dict)

    def nonstream(self, **over):
        status, b = self.s.json("POST", "/v1/chat/completions", body(**over))
        self.assertEqual(status, 200, b)
        choice = b["choices"][0]
        self.assertEqual(choice["finish_reason"], "tool_calls", b)
        calls = choice["message"]["tool_calls"]
        self.assertEqual(len(calls), 1, b)
        return calls[0]

    def test_required_nonstream(self):
        for seed, temp in ((1, 0), (2, 1.0), (3, 1.5)):
            with self.subTest(seed=seed, temperature=temp):
                self.check_call(self.nonstream(tool_choice="required", seed=seed,
                                               temperature=temp), NAMES)

    def test_named_nonstream(self):
        for name in NAMES:
            for thinking in (False, True):
                with self.subTest(name=name, thinking=thinking):
                    call = self.nonstream(
                        tool_choice={"type": "function", "function": {"name": name}},
                        temperature=1.0, seed=5, thinking={"type": "enabled" if thinking
                                                           else "disabled"})
                    self.check_call(call, {name})

    def test_stream_deltas_accumulate(self):
        status, _, lines = self.s.stream_lines(
            "/v1/chat/completions", body(tool_choice="required", temperature=1.0, seed=9,
                                         stream=True))
        self.assertEqual(status, 200)
        events = parse_sse(lines)
        calls = {}
        finish = None
        for e in events:
            for c in e["choices"]:
                for tc in c["delta"].get("tool_calls", []):
                    i = tc["index"]
                    if i not in calls:
                        self.assertTrue(tc.get("id"), tc)
                        self.assertTrue(tc["function"].get("name"), tc)
                        calls[i] = {"id": tc["id"], "type": "function",
                                    "function": {"name": tc["function"]["name"],
                                                 "arguments": ""}}
                    else:  # continuation fragments carry no null id / name
                        self.assertNotIn(None, (tc.get("id", 1), tc["function"].get("name", 1)))
                    calls[i]["function"]["arguments"] += tc["function"].get("arguments", "")
                finish = c.get("finish_reason") or finish
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(len(calls), 1)
        self.check_call(calls[0], NAMES)

    def test_unknown_named_is_400(self):
        status, b = self.s.json("POST", "/v1/chat/completions", body(
            tool_choice={"type": "function", "function": {"name": "nope"}}))
        self.assertEqual(status, 400, b)
        self.assertIn("tool_choice", b["error"]["message"])

    def test_none_suppresses_calls(self):
        status, b = self.s.json("POST", "/v1/chat/completions",
                                body(tool_choice="none", max_tokens=16, temperature=0))
        self.assertEqual(status, 200, b)
        choice = b["choices"][0]
        self.assertNotEqual(choice["finish_reason"], "tool_calls")
        self.assertFalse(choice["message"].get("tool_calls"))


if __name__ == "__main__":
    BINARY, MODEL = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])
