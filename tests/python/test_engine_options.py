"""LLM(...)'s engine keywords mirror the vosti CLI's engine options (tools/engine_options.cc, printed
by `vosti engine-options`): every CLI option has a keyword that sets the same EngineConfig field,
LLM() leaves it at the CLI's default, no keyword sets a field the CLI has no option for, and
docs/PYTHON.md names every keyword. The check is a function of the two tables, so the last tests
show it failing on doctored ones (an option added in C++ only, a keyword added in Python only, a
default changed on one side)."""
import copy
import inspect
import json
import os
import subprocess

import pytest

vosti = pytest.importorskip("vosti")
from vosti import llm as llm_module  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli_table(vosti_bin):
    out = subprocess.run([vosti_bin, "engine-options"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def python_keywords():
    """keyword -> (EngineConfig field, whether it sets the negation of its value)."""
    keywords = {k: (f, False) for k, f in llm_module._ENGINE_OPTIONS.items()}
    keywords.update({k: (f, True) for k, f in llm_module._NEGATED_OPTIONS.items()})
    keywords["device"] = ("device", False)  # LLM()'s named argument
    return keywords


def python_defaults():
    """The EngineConfig an LLM() without engine keywords runs with."""
    device = inspect.signature(vosti.LLM).parameters["device"].default
    return llm_module._engine_config(device, {})


def mismatches(cli_options, keywords, defaults):
    """What keeps the Python table from mirroring the CLI's, one line each ([]: it mirrors it)."""
    problems = []
    python_fields = {field for field, _ in keywords.values()}
    for o in cli_options:
        flag, field = o["flag"], o["field"]
        if field not in python_fields:
            problems.append(f"{flag} (EngineConfig::{field}) has no LLM() keyword: add it to vosti/llm.py")
        elif not hasattr(defaults, field):
            problems.append(f"{flag}: _core.EngineConfig has no '{field}': bind it in python/src/module.cc")
        else:
            value = getattr(defaults, field)
            if value != o["default"] or type(value).__name__ != o["type"]:
                problems.append(f"{flag}: the CLI's default is {o['default']!r} ({o['type']}), "
                                f"LLM()'s {value!r} ({type(value).__name__})")
    cli_fields = {o["field"] for o in cli_options}
    for keyword, (field, _) in sorted(keywords.items()):
        if field not in cli_fields:
            problems.append(f"LLM({keyword}=...) sets EngineConfig::{field}, which no CLI engine option sets: "
                            f"add it to tools/engine_options.cc")
    return problems


@pytest.fixture(scope="module")
def cli_options(vosti_bin):
    return cli_table(vosti_bin)


def test_the_python_keywords_mirror_the_cli_engine_options(cli_options):
    assert len(cli_options) >= 15
    assert mismatches(cli_options, python_keywords(), python_defaults()) == []


def test_every_keyword_sets_its_field():
    defaults = python_defaults()
    for keyword, (field, negated) in python_keywords().items():
        if keyword == "device":
            continue
        value = getattr(defaults, field)
        config = llm_module._engine_config("cpu", {keyword: (not value) if negated else value})
        assert getattr(config, field) == value, keyword
    with pytest.raises(TypeError, match=r"engine options: .*\battention_split,"):  # the known ones are listed
        llm_module._engine_config("cpu", {"attention_splits": 64})


def test_the_docs_name_every_keyword():
    with open(os.path.join(REPO, "docs", "PYTHON.md")) as f:
        docs = f.read()
    for keyword in python_keywords():
        assert f"`{keyword}`" in docs, f"docs/PYTHON.md does not name the LLM() keyword {keyword}"
        assert keyword in vosti.LLM.__doc__, f"LLM's docstring does not name {keyword}"


def test_the_check_fails_on_a_cli_option_without_its_keyword(cli_options):
    added = cli_options + [dict(cli_options[0], flag="--new-knob", field="new_knob", default=1, type="int")]
    assert mismatches(added, python_keywords(), python_defaults()) == [
        "--new-knob (EngineConfig::new_knob) has no LLM() keyword: add it to vosti/llm.py"]
    keywords = python_keywords()
    del keywords["attention_split"]
    problems = mismatches(cli_options, keywords, python_defaults())
    assert len(problems) == 1 and problems[0].startswith("--attention-split "), problems


def test_the_check_fails_on_a_keyword_without_its_cli_option(cli_options):
    keywords = dict(python_keywords(), speculative_tokens=("num_speculative_tokens", False))
    assert mismatches(cli_options, keywords, python_defaults()) == [
        "LLM(speculative_tokens=...) sets EngineConfig::num_speculative_tokens, which no CLI engine option sets: "
        "add it to tools/engine_options.cc"]


def test_the_check_fails_on_a_different_default(cli_options):
    defaults = python_defaults()
    defaults.max_num_seqs = defaults.max_num_seqs + 1  # as if llm.py set its own default
    problems = mismatches(cli_options, python_keywords(), defaults)
    assert len(problems) == 1 and problems[0].startswith("--max-num-seqs: the CLI's default is 64"), problems
    changed = copy.deepcopy(cli_options)
    next(o for o in changed if o["field"] == "kv_cache_bytes")["default"] = 1 << 20
    problems = mismatches(changed, python_keywords(), python_defaults())
    assert len(problems) == 1 and problems[0].startswith("--kv-cache-mb: the CLI's default is 1048576"), problems
