"""Live-server tests of OpenAI tool calls on the default model (SmolLM2-135M, whose template takes
no tools: the fallback system turn carries them). The official `openai` client runs the whole flow
-- tool call, tool result, final answer -- streaming and not, with tool_choice "required" and a
named function, which the grammar (a structural tag in the served hermes format) turns into a call
whatever a 135M model would choose; "auto"
needs --enable-auto-tool-choice (a second server); bad tool input gets a 400 naming the field while
a neighbour streams undisturbed; a "required" request in a crowd gives its digests alone.
Run: python3 tests/server/test_server_tools.py
"""
import json
import os
import sys
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

BINARY, MODEL = h.require_model()
try:
    import openai
except ImportError:
    h.skip("the `openai` package is missing; run scripts/setup --test")

SERVER = None
NAME = "smollm2"
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                        "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The local time in a time zone.",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}},
                       "required": ["zone"]}}},
]
QUESTION = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the weather like in Paris today?"}]


def setUpModule():
    global SERVER
    SERVER = h.Server(BINARY, MODEL, ["--max-num-seqs", "32", "--kv-cache-mb", "64"])


def tearDownModule():
    if SERVER:
        code = SERVER.stop()
        assert code == 0, f"vosti serve exited {code}:\n{SERVER.log_text()}"


def client(server=None):
    return openai.OpenAI(base_url=(server or SERVER).base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def collect_stream(stream):
    """(content, {index: {"id", "name", "arguments"}}, finish_reason) of a chat stream."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            if tc.id:
                assert call["id"] is None, "a call's id came twice"
                call["id"] = tc.id
            if tc.function and tc.function.name:
                call["name"] = tc.function.name
            if tc.function and tc.function.arguments:
                call["arguments"] += tc.function.arguments
        finish = choice.finish_reason or finish
    return content, calls, finish


class ToolFlowTest(unittest.TestCase):
    def check_call(self, call, name):
        self.assertTrue(call.id.startswith("call_"))
        self.assertEqual(call.type, "function")
        self.assertEqual(call.function.name, name)
        args = json.loads(call.function.arguments)
        self.assertIsInstance(args, dict)
        return args

    def test_required_call_result_then_answer(self):
        c = client()
        first = c.chat.completions.create(model=NAME, messages=QUESTION, tools=TOOLS, tool_choice="required",
                                          parallel_tool_calls=False, temperature=0, max_tokens=80)
        choice = first.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertIsNone(choice.message.content)
        self.assertEqual(len(choice.message.tool_calls), 1)
        call = choice.message.tool_calls[0]
        self.assertIn(call.function.name, ("get_weather", "get_time"))
        args = self.check_call(call, call.function.name)
        self.assertTrue(set(args) >= ({"city", "unit"} if call.function.name == "get_weather" else {"zone"}))
        # The call and its result go back through the template; the answer is plain text.
        history = QUESTION + [choice.message.model_dump(exclude_none=True),
                              {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 C."}]
        final = c.chat.completions.create(model=NAME, messages=history, tools=TOOLS, tool_choice="none",
                                          temperature=0, max_tokens=40)
        self.assertIn(final.choices[0].finish_reason, ("stop", "length"))
        self.assertTrue(final.choices[0].message.content)
        self.assertFalse(final.choices[0].message.tool_calls)
        # Streamed, the same request gives the same call, its arguments in fragments.
        content, calls, finish = collect_stream(c.chat.completions.create(
            model=NAME, messages=QUESTION, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
            temperature=0, max_tokens=80, stream=True))
        self.assertEqual((content, finish), ("", "tool_calls"))
        self.assertEqual([(v["name"], v["arguments"]) for v in calls.values()],
                         [(call.function.name, call.function.arguments)])
        # Streaming the final answer gives the same text.
        content, calls, finish = collect_stream(c.chat.completions.create(
            model=NAME, messages=history, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=40, stream=True))
        self.assertEqual(content, final.choices[0].message.content)
        self.assertEqual(calls, {})

    def test_named_function_streaming_and_not(self):
        c = client()
        choice = {"type": "function", "function": {"name": "get_time"}}
        full = c.chat.completions.create(model=NAME, messages=QUESTION, tools=TOOLS, tool_choice=choice,
                                         temperature=0, max_tokens=60)
        self.assertEqual(full.choices[0].finish_reason, "tool_calls")
        call = full.choices[0].message.tool_calls[0]
        self.assertIn("zone", self.check_call(call, "get_time"))
        content, calls, finish = collect_stream(c.chat.completions.create(
            model=NAME, messages=QUESTION, tools=TOOLS, tool_choice=choice, temperature=0, max_tokens=60,
            stream=True))
        self.assertEqual((content, finish), ("", "tool_calls"))
        self.assertEqual(len(calls), 1)
        self.assertTrue(calls[0]["id"].startswith("call_"))
        self.assertEqual((calls[0]["name"], calls[0]["arguments"]), ("get_time", call.function.arguments))
        history = QUESTION + [full.choices[0].message.model_dump(exclude_none=True),
                              {"role": "tool", "tool_call_id": call.id, "content": "09:41"}]
        final = c.chat.completions.create(model=NAME, messages=history, tools=TOOLS, tool_choice="none",
                                          temperature=0, max_tokens=30)
        self.assertTrue(final.choices[0].message.content)

    def test_the_forced_output_is_the_served_format(self):
        # SmolLM2's template takes no tools: the served format is the fallback's, hermes, and the
        # structural tag writes exactly <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>.
        for choice, n in (("required", 1), ({"type": "function", "function": {"name": "get_time"}}, 1)):
            body = {"model": NAME, "messages": QUESTION, "tools": TOOLS, "tool_choice": choice,
                    "parallel_tool_calls": False, "temperature": 0.7, "seed": 5, "max_tokens": 80,
                    "return_token_ids": True}
            status, reply = SERVER.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, reply)
            out = reply["choices"][0]
            self.assertEqual(out["finish_reason"], "tool_calls", out)
            status, text = SERVER.post("/detokenize", {"model": NAME, "tokens": out["token_ids"]})
            self.assertEqual(status, 200, text)
            calls = out["message"]["tool_calls"]
            self.assertEqual(len(calls), n)
            fn = calls[0]["function"]
            if isinstance(choice, dict):
                self.assertEqual(fn["name"], "get_time")
            expected = f'<tool_call>\n{{"name": "{fn["name"]}", "arguments": {fn["arguments"]}}}\n</tool_call>'
            self.assertEqual(text["prompt"].removesuffix("<|im_end|>"), expected)  # the stop token may end it

    def test_parallel_calls_when_allowed(self):
        body = {"model": NAME, "messages": QUESTION, "tools": TOOLS, "tool_choice": "required", "temperature": 0,
                "max_tokens": 120}
        status, reply = SERVER.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, reply)
        choice = reply["choices"][0]
        if choice["finish_reason"] == "tool_calls":
            for i, call in enumerate(choice["message"]["tool_calls"]):
                self.assertIn(call["function"]["name"], ("get_weather", "get_time"))
                json.loads(call["function"]["arguments"])
        else:  # the grammar allows as many calls as max_tokens holds: a cut array is no call
            self.assertEqual(choice["finish_reason"], "length")

    def test_auto_needs_the_flag(self):
        with self.assertRaises(openai.BadRequestError) as e:
            client().chat.completions.create(model=NAME, messages=QUESTION, tools=TOOLS, max_tokens=4)
        self.assertIn("--enable-auto-tool-choice", str(e.exception))
        auto = h.Server(BINARY, MODEL, ["--kv-cache-mb", "32", "--enable-auto-tool-choice"])
        try:
            self.assertIn("hermes parser", auto.log_text())
            r = client(auto).chat.completions.create(model=NAME, messages=QUESTION, tools=TOOLS, temperature=0,
                                                     max_tokens=24)
            choice = r.choices[0]
            # A 135M model rarely calls by itself; whatever it wrote is content or a parsed call.
            if choice.finish_reason == "tool_calls":
                self.assertTrue(choice.message.tool_calls)
            else:
                self.assertIsNotNone(choice.message.content)
        finally:
            self.assertEqual(auto.stop(), 0)

    def test_bad_tool_input_is_400_and_never_disturbs_a_neighbour(self):
        good = {"model": NAME, "messages": QUESTION, "tools": TOOLS, "tool_choice": "required", "temperature": 0,
                "max_tokens": 60, "stream": True, "parallel_tool_calls": False, "return_logits_digests": True}
        _, baseline, _ = SERVER.stream("/v1/chat/completions", good)
        result = {}
        t = threading.Thread(target=lambda: result.update(r=SERVER.stream("/v1/chat/completions", good)))
        t.start()
        user = [{"role": "user", "content": "hi"}]
        bad = [
            ({"messages": user, "tools": [{"type": "function"}]}, "tools[0].function"),
            ({"messages": user, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]},
             "tools[0].function.parameters"),
            ({"messages": user, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
             "tool_choice"),
            ({"messages": user, "tool_choice": "required"}, "tool_choice"),
            ({"messages": user + [{"role": "tool", "content": "x"}]}, "messages[1].tool_call_id"),
            ({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {
                "name": "f", "arguments": "{not json"}}]}]}, "messages[0].tool_calls[0].function.arguments"),
            ({"messages": user, "tools": TOOLS, "tool_choice": "required",
              "response_format": {"type": "json_object"}}, "tool_choice"),
        ]
        for body, param in bad:
            status, reply = SERVER.post("/v1/chat/completions", dict(body, model=NAME))
            self.assertEqual(status, 400, (body, reply))
            self.assertEqual(reply["error"]["param"], param, reply)
        t.join()
        status, chunks, done = result["r"]
        self.assertEqual((status, done), (200, True))
        digests = lambda cs: [d for c in cs for d in c["choices"][0].get("logits_digests", [])]  # noqa: E731
        self.assertEqual(digests(chunks), digests(baseline))


class ToolDeterminismTest(unittest.TestCase):
    def test_a_required_call_in_a_crowd_equals_itself_alone(self):
        probe = {"model": NAME, "messages": QUESTION, "tools": TOOLS, "tool_choice": "required", "temperature": 0.8,
                 "seed": 11, "max_tokens": 48, "return_logits_digests": True, "return_token_ids": True}
        status, alone = SERVER.post("/v1/chat/completions", probe)
        self.assertEqual(status, 200, alone)
        crowd = []
        for i in range(15):
            if i % 3 == 0:
                crowd.append(("/v1/completions", {"model": NAME, "prompt": f"Story {i}: once upon a time",
                                                  "max_tokens": 20 + i, "temperature": 0.7, "seed": i}))
            elif i % 3 == 1:
                crowd.append(("/v1/chat/completions", dict(probe, seed=100 + i, tool_choice={
                    "type": "function", "function": {"name": "get_time"}})))
            else:
                crowd.append(("/v1/chat/completions", {"model": NAME, "messages": QUESTION, "max_tokens": 16 + i,
                                                       "response_format": {"type": "json_object"}}))
        crowd.insert(7, ("/v1/chat/completions", probe))
        with ThreadPoolExecutor(len(crowd)) as pool:
            replies = list(pool.map(lambda pb: SERVER.post(*pb), crowd))
        for status, reply in replies:
            self.assertEqual(status, 200, reply)
        together = replies[7][1]["choices"][0]
        solo = alone["choices"][0]
        self.assertEqual(together["token_ids"], solo["token_ids"])
        self.assertEqual(together["logits_digests"], solo["logits_digests"])
        self.assertEqual(together["message"]["tool_calls"][0]["function"],
                         solo["message"]["tool_calls"][0]["function"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
