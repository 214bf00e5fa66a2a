"""LLM.chat(tools=...) on the default model, in vLLM's shape: the tools become the template's
`tools` variable, assistant tool_calls (arguments as JSON text) and tool results go through the
template, and a call forced by the arguments' JSON schema gives arguments that validate."""
import json

import pytest

from vosti import SamplingParams, StructuredOutputsParams

# A template that renders what transformers passes: tools, tool_calls with dict arguments, tool turns.
TEMPLATE = (
    "{% if tools %}TOOLS:{% for t in tools %} {{ t.function.name }}={{ t.function.parameters | tojson }}{% endfor %}\n"
    "{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}CALL {{ c.function.name }} {{ c.function.arguments | tojson }}"
    "{% endfor %}{% endif %}{% if m.tool_call_id %} [{{ m.tool_call_id }}]{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16}},
                   "required": ["city"]}}}]
HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
]


def test_tools_and_tool_turns_reach_the_template(llm):
    out = llm.chat(HISTORY, SamplingParams(temperature=0, max_tokens=4), chat_template=TEMPLATE, tools=TOOLS)[0]
    assert out.prompt.startswith('TOOLS: get_weather={"type": "object", "properties": {"city": ')
    assert 'CALL get_weather {"city": "Paris"}' in out.prompt
    assert "tool: Sunny [call_1]" in out.prompt
    # Without tools the template's tools section stays out.
    plain = llm.chat(HISTORY, SamplingParams(temperature=0, max_tokens=4), chat_template=TEMPLATE)[0]
    assert not plain.prompt.startswith("TOOLS:")


def test_a_forced_call_validates(llm):
    jsonschema = pytest.importorskip("jsonschema")
    schema = TOOLS[0]["function"]["parameters"]
    out = llm.chat([{"role": "user", "content": "Weather in Oslo?"}],
                   SamplingParams(temperature=0, max_tokens=40, structured_outputs=StructuredOutputsParams(json=schema)),
                   tools=TOOLS)[0]
    jsonschema.validate(json.loads(out.outputs[0].text), schema)


def test_bad_tool_input_raises_value_error(llm):
    with pytest.raises(ValueError, match="tools"):
        llm.chat(HISTORY, tools="get_weather")
    bad = [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]
    with pytest.raises(ValueError, match="not JSON"):
        llm.chat(bad, chat_template=TEMPLATE)


def test_a_template_without_tools_gets_the_servers_fallback(llm, vosti_bin, model_path):
    # SmolLM2's template has no tools section: the tools and the call format join the system turn,
    # the earlier call and its result become text, and the prompt is token for token the server's.
    import server_harness

    out = llm.chat(HISTORY, SamplingParams(temperature=0, max_tokens=1), tools=TOOLS)[0]
    assert "<tools>\n" + json.dumps(TOOLS[0], separators=(",", ":")) + "\n</tools>" in out.prompt
    assert '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}}\n</tool_call>' in out.prompt
    assert "<tool_response>\nSunny\n</tool_response>" in out.prompt
    # Without tools, the earlier call and result are still written as text (the template cannot show them).
    plain = llm.chat(HISTORY, SamplingParams(temperature=0, max_tokens=1))[0]
    assert "<tool_response>\nSunny\n</tool_response>" in plain.prompt
    assert "<tools>\n</tools>" in plain.prompt
    # apply_chat_template stays transformers': `tools` is a template variable, no fallback.
    text = llm.get_tokenizer().apply_chat_template(HISTORY, tokenize=False, tools=TOOLS)
    assert "<tools>" not in text and "<tool_response>" not in text
    server = server_harness.Server(vosti_bin, model_path, ["--kv-cache-mb", "32"])
    try:
        for tools, ref in ((TOOLS, out), (None, plain)):
            body = {"model": "smollm2", "messages": HISTORY, "max_tokens": 1, "temperature": 0,
                    "return_token_ids": True}
            if tools:
                body.update(tools=tools, tool_choice="none")
            status, r = server.post("/v1/chat/completions", body)
            assert status == 200, r
            assert r["choices"][0]["prompt_token_ids"] == ref.prompt_token_ids
    finally:
        assert server.stop() == 0
