"""Hand-written broken projects: each yields its specific diagnostic (code, file, line) and never a traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from aqven.engine.check import check_project
from aqven.project.diagnostics import Diagnostic
from support.diagnostics import assert_well_formed
from support.projects import (
    AGENT_YAML,
    BASE,
    DATASET_YAML,
    ENRICH_PY,
    HELPER_FLOW_YAML,
    Overrides,
    line_of,
    project_files,
    write_files,
)

MAIN = "flows/main/flow.yaml"
HELPER = "flows/helper/flow.yaml"
AGENT = "agents/a.yaml"
DATASET = "datasets/d.yaml"
CONFIG = "aqven.yaml"

Line = int | str | tuple[str, int] | None  # exact line, a needle whose (first / n-th) line is expected, or unchecked


@dataclass
class Broken:
    id: str
    change: Overrides | Callable[[Path], None]
    code: str
    file: str | None = None
    line: Line = None


def sub(file: str, old: str, new: str, count: int = 1) -> Overrides:
    text = BASE[file]
    assert isinstance(text, str) and text.count(old) >= count, (file, old)
    return {file: text.replace(old, new, count)}


def add(file: str, more: str) -> Overrides:
    text = BASE[file]
    assert isinstance(text, str)
    return {file: text + more}


def _symlink_prompt(root: Path) -> None:
    outside = root.parent / f"{root.name}_outside.md"
    outside.write_text("secret {{ ticket }}\n", encoding="utf-8")
    (root / "flows/main/classify.md").unlink()
    os.symlink(outside, root / "flows/main/classify.md")


def _flow_folder_without_yaml(root: Path) -> None:
    (root / "flows/empty").mkdir()
    (root / "flows/empty/notes.md").write_text("nothing\n", encoding="utf-8")


def _prompt_is_directory(root: Path) -> None:
    (root / "flows/main/classify.md").unlink()
    (root / "flows/main/classify.md").mkdir()


TWO_NODE_CYCLE = HELPER_FLOW_YAML.replace(
    "    output: string\n",
    "    output: string\n"
    "  - id: ping\n    kind: code\n    code: helper.py:shout\n    inputs: {text: $pong.out}\n    output: string\n"
    "  - id: pong\n    kind: code\n    code: helper.py:shout\n    inputs: {text: $ping.out}\n    output: string\n",
).replace("input: {text", "result: $shout.out\ninput: {text")

CASES: list[Broken] = [
    # ---- YAML ------------------------------------------------------------------------------------
    Broken("yaml_unclosed_bracket", {CONFIG: "package: [demo\nname: x\n"}, "E_YAML_SYNTAX", CONFIG),
    Broken("yaml_duplicate_key", add(CONFIG, "package: other\n"), "E_YAML_DUPLICATE_KEY", CONFIG, 9),
    Broken(
        "yaml_duplicate_nested_key",
        sub(AGENT, "  temperature: 0.3\n", "  temperature: 0.3\n  temperature: 0.4\n"),
        "E_YAML_DUPLICATE_KEY",
        AGENT,
        5,
    ),
    Broken(
        "yaml_duplicate_node_key",
        sub(MAIN, "    agent: a\n", "    agent: a\n    agent: b\n"),
        "E_YAML_DUPLICATE_KEY",
        MAIN,
        "agent: b",
    ),
    Broken("yaml_tab_indent", sub(AGENT, "  temperature: 0.3", "\ttemperature: 0.3"), "E_YAML_SYNTAX", AGENT, 4),
    Broken("yaml_unclosed_quote", sub(HELPER, '"integer?"', '"integer?'), "E_YAML_SYNTAX", HELPER),
    Broken("yaml_two_documents", add(CONFIG, "---\npackage: again\n"), "E_YAML_SYNTAX", CONFIG, 9),
    Broken("yaml_python_tag", {CONFIG: "package: !!python/object/apply:os.system [ls]\n"}, "E_YAML_SYNTAX", CONFIG, 1),
    Broken("yaml_unknown_tag", add(DATASET, "extra: !secret x\n"), "E_YAML_SYNTAX", DATASET),
    Broken("yaml_recursive_alias", {CONFIG: "package: demo\nname: &a [*a]\n"}, "E_YAML_SYNTAX", CONFIG, 2),
    Broken("yaml_nested_too_deep", {CONFIG: "package: " + "[" * 2000 + "]" * 2000 + "\n"}, "E_YAML_SYNTAX", CONFIG),
    Broken(
        "yaml_billion_laughs",
        {
            DATASET: "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdef", "bcdefg", strict=True))
            + "cases: []\n"
        },
        "E_YAML_SYNTAX",
        DATASET,
    ),
    Broken(
        "yaml_nul_character",
        sub(AGENT, "description: The default agent.", "description: a\x00b"),
        "E_YAML_SYNTAX",
        AGENT,
        2,
    ),
    Broken("yaml_complex_key", add(CONFIG, "? [a, b]\n: x\n"), "E_YAML_SYNTAX", CONFIG, 9),
    Broken(
        "yaml_unquoted_colon",
        sub(AGENT, "description: The default agent.", "description: Note: it works"),
        "E_YAML_SYNTAX",
        AGENT,
        2,
    ),
    Broken("file_not_utf8", {AGENT: AGENT_YAML.encode() + b"description2: \xff\xfe\n"}, "E_FILE_UNREADABLE", AGENT, 10),
    Broken("file_binary_garbage", {DATASET: bytes(range(256))}, "E_FILE_UNREADABLE", DATASET),
    Broken("file_empty_config", {CONFIG: ""}, "E_FILE_EMPTY", CONFIG, 1),
    Broken("file_empty_dataset", {DATASET: "\n\n"}, "E_FILE_EMPTY", DATASET),
    Broken("file_only_comments_flow", {HELPER: "# nothing yet\n"}, "E_FILE_EMPTY", HELPER),
    Broken("file_config_is_list", {CONFIG: "- package: demo\n"}, "E_NOT_MAPPING", CONFIG, 1),
    Broken("file_agent_is_scalar", {AGENT: "openrouter:openai/gpt-4.1-mini\n"}, "E_NOT_MAPPING", AGENT),
    Broken("file_dataset_is_list", {DATASET: "- name: a\n- name: b\n"}, "E_NOT_MAPPING", DATASET),
    # ---- unknown keys ----------------------------------------------------------------------------
    Broken("unknown_key_config", sub(CONFIG, "concurrency: 4", "concurency: 4"), "E_UNKNOWN_KEY", CONFIG, 5),
    Broken(
        "unknown_key_research",
        sub(CONFIG, '  spend_cap_usd: "2.50"', '  spend_cap: "2.50"'),
        "E_UNKNOWN_KEY",
        CONFIG,
        4,
    ),
    Broken("unknown_key_engine", add(CONFIG, "  retries: 3\n"), "E_UNKNOWN_KEY", CONFIG, 9),
    Broken("unknown_key_agent", sub(AGENT, "output_mode: tool", "outputmode: tool"), "E_UNKNOWN_KEY", AGENT, 7),
    Broken(
        "unknown_key_agent_settings", sub(AGENT, "  max_tokens: 800", "  max_token: 800"), "E_UNKNOWN_KEY", AGENT, 5
    ),
    Broken("unknown_key_agent_id", add(AGENT, "id: other\n"), "E_UNKNOWN_KEY", AGENT, 10),
    Broken("unknown_key_dataset", add(DATASET, "owner: me\n"), "E_UNKNOWN_KEY", DATASET, "owner: me"),
    Broken(
        "unknown_key_case", sub(DATASET, "    expected_output:", "    expected:"), "E_UNKNOWN_KEY", DATASET, "expected:"
    ),
    Broken("unknown_key_flow", add(MAIN, "outputs: string\n"), "E_UNKNOWN_KEY", MAIN, "outputs: string"),
    Broken(
        "unknown_key_llm_node",
        sub(MAIN, "    prompt: classify.md", "    prompt: classify.md\n    promt: x.md"),
        "E_UNKNOWN_KEY",
        MAIN,
        "promt:",
    ),
    Broken(
        "unknown_key_group_child",
        sub(MAIN, "        prompt: judge.md\n", "        prompt: judge.md\n        temp: 1\n"),
        "E_UNKNOWN_KEY",
        MAIN,
        "temp: 1",
    ),
    Broken(
        "unknown_key_call_output",
        sub(MAIN, "    flow: helper\n", "    flow: helper\n    output: string\n"),
        "E_UNKNOWN_KEY",
        MAIN,
        ("output: string", 1),
    ),
    Broken(
        "unknown_key_code_node_agent",
        sub(MAIN, "    code: enrich.py:enrich\n", "    code: enrich.py:enrich\n    agent: a\n"),
        "E_UNKNOWN_KEY",
        MAIN,
        ("agent: a", 2),
    ),
    # ---- missing keys ----------------------------------------------------------------------------
    Broken("missing_package", sub(CONFIG, "package: demo_project\n", ""), "E_MISSING_KEY", CONFIG),
    Broken("missing_model", sub(AGENT, "model: openrouter:openai/gpt-4.1-mini\n", ""), "E_MISSING_KEY", AGENT),
    Broken("missing_cases", {DATASET: "description: none\n"}, "E_MISSING_KEY", DATASET),
    Broken(
        "missing_case_name",
        sub(DATASET, "  - name: flicker\n    input:", "  - input:"),
        "E_MISSING_KEY",
        DATASET,
        "LED strip",
    ),
    Broken("missing_nodes", {HELPER: "input: string\noutput: string\n"}, "E_MISSING_KEY", HELPER),
    Broken("missing_prompt", sub(MAIN, "    prompt: classify.md\n", ""), "E_MISSING_KEY", MAIN, "id: classify"),
    Broken("missing_code", sub(HELPER, "    code: helper.py:shout\n", ""), "E_MISSING_KEY", HELPER, "id: shout"),
    Broken("missing_call_flow", sub(MAIN, "    flow: helper\n", ""), "E_MISSING_KEY", MAIN, "id: draft"),
    Broken(
        "missing_question", sub(MAIN, "    question: Is this reply fine?\n", ""), "E_MISSING_KEY", MAIN, "id: review"
    ),
    Broken(
        "missing_node_id", sub(HELPER, "  - id: shout\n    kind: code", "  - kind: code"), "E_MISSING_KEY", HELPER, 4
    ),
    Broken("missing_node_kind", sub(HELPER, "    kind: code\n", ""), "E_MISSING_KEY", HELPER, 4),
    Broken(
        "missing_group_child_kind",
        sub(MAIN, "      - id: merge\n        kind: code\n", "      - id: merge\n"),
        "E_MISSING_KEY",
        MAIN,
        "id: merge",
    ),
    # ---- wrong types -----------------------------------------------------------------------------
    Broken("type_concurrency_text", sub(CONFIG, "concurrency: 4", "concurrency: many"), "E_WRONG_TYPE", CONFIG, 5),
    Broken("type_research_text", {CONFIG: "package: demo\nresearch: lots\n"}, "E_WRONG_TYPE", CONFIG, 2),
    Broken(
        "type_settings_list",
        sub(AGENT, "settings:\n  temperature: 0.3\n  max_tokens: 800\n  timeout_s: 60\n", "settings: [0.3]\n"),
        "E_WRONG_TYPE",
        AGENT,
        3,
    ),
    Broken("type_max_tokens_text", sub(AGENT, "max_tokens: 800", "max_tokens: lots"), "E_WRONG_TYPE", AGENT, 5),
    Broken(
        "type_output_retries_float", sub(AGENT, "output_retries: 2", "output_retries: 1.5"), "E_WRONG_TYPE", AGENT, 8
    ),
    Broken("type_seed_text", sub(AGENT, "  timeout_s: 60", "  timeout_s: 60\n  seed: abc"), "E_WRONG_TYPE", AGENT, 7),
    Broken(
        "type_model_number", sub(AGENT, "model: openrouter:openai/gpt-4.1-mini", "model: 42"), "E_WRONG_TYPE", AGENT, 1
    ),
    Broken("type_cases_mapping", {DATASET: "cases: {name: a}\n"}, "E_WRONG_TYPE", DATASET, 1),
    Broken(
        "type_tags_text", sub(DATASET, "tags: [hardware]", "tags: hardware"), "E_WRONG_TYPE", DATASET, "tags: hardware"
    ),
    Broken(
        "type_context_list",
        sub(DATASET, 'context: {order_total: "49.90"}', "context: [49.90]"),
        "E_WRONG_TYPE",
        DATASET,
        "context:",
    ),
    Broken("type_case_name_number", sub(DATASET, "name: flicker", "name: 12"), "E_WRONG_TYPE", DATASET, "name: 12"),
    Broken("type_nodes_mapping", {HELPER: "nodes: {id: a}\n"}, "E_WRONG_TYPE", HELPER, 1),
    Broken("type_node_is_text", add(HELPER, "  - just text\n"), "E_WRONG_TYPE", HELPER, "just text"),
    Broken(
        "type_inputs_list",
        sub(HELPER, "inputs: {text: $input.text}", "inputs: [$input.text]"),
        "E_WRONG_TYPE",
        HELPER,
        "inputs:",
    ),
    Broken(
        "type_inputs_number_key",
        sub(HELPER, "inputs: {text: $input.text}", "inputs: {1: $input.text}"),
        "E_WRONG_TYPE",
        HELPER,
        "inputs:",
    ),
    Broken("type_result_number", add(HELPER, "result: 3\n"), "E_WRONG_TYPE", HELPER, "result: 3"),
    Broken("type_spend_cap_text", sub(CONFIG, '"2.50"', "abc"), "E_WRONG_TYPE", CONFIG, 4),
    Broken("type_spend_cap_bool", sub(CONFIG, '"2.50"', "true"), "E_WRONG_TYPE", CONFIG, 4),
    Broken("value_output_mode", sub(AGENT, "output_mode: tool", "output_mode: json"), "E_INVALID_VALUE", AGENT, 7),
    Broken("value_node_kind_unknown", sub(HELPER, "kind: code", "kind: python"), "E_UNKNOWN_NODE_KIND", HELPER, 4),
    Broken("value_node_kind_number", sub(HELPER, "kind: code", "kind: 3"), "E_UNKNOWN_NODE_KIND", HELPER, 4),
    # ---- ranges ----------------------------------------------------------------------------------
    Broken("range_concurrency_negative", sub(CONFIG, "concurrency: 4", "concurrency: -1"), "E_VALUE_RANGE", CONFIG, 5),
    Broken("range_concurrency_zero", sub(CONFIG, "concurrency: 4", "concurrency: 0"), "E_VALUE_RANGE", CONFIG, 5),
    Broken("range_temperature_5", sub(AGENT, "temperature: 0.3", "temperature: 5"), "E_VALUE_RANGE", AGENT, 4),
    Broken("range_top_p", sub(AGENT, "  timeout_s: 60", "  timeout_s: 60\n  top_p: 1.5"), "E_VALUE_RANGE", AGENT, 7),
    Broken("range_timeout_zero", sub(AGENT, "timeout_s: 60", "timeout_s: 0"), "E_VALUE_RANGE", AGENT, 6),
    Broken("range_spend_cap_zero", sub(CONFIG, '"2.50"', "0"), "E_VALUE_RANGE", CONFIG, 4),
    Broken("range_spend_cap_negative", sub(CONFIG, '"2.50"', '"-1.00"'), "E_VALUE_RANGE", CONFIG, 4),
    Broken("range_spend_cap_nan", sub(CONFIG, '"2.50"', ".nan"), "E_VALUE_RANGE", CONFIG, 4),
    Broken(
        "range_provider_retries", sub(CONFIG, "provider_retries: 1", "provider_retries: 11"), "E_VALUE_RANGE", CONFIG, 7
    ),
    Broken(
        "range_output_retries_negative",
        sub(AGENT, "output_retries: 2", "output_retries: -2"),
        "E_VALUE_RANGE",
        AGENT,
        8,
    ),
    Broken("range_nodes_empty", {HELPER: "nodes: []\n"}, "E_VALUE_RANGE", HELPER, 1),
    Broken("range_case_name_empty", sub(DATASET, "name: flicker", 'name: ""'), "E_VALUE_RANGE", DATASET, 'name: ""'),
    # ---- models and providers --------------------------------------------------------------------
    Broken(
        "model_without_provider",
        sub(AGENT, "openrouter:openai/gpt-4.1-mini", "gpt-4.1-mini"),
        "E_MODEL_INVALID",
        AGENT,
        1,
    ),
    Broken(
        "model_without_name", sub(AGENT, "openrouter:openai/gpt-4.1-mini", '"openrouter:"'), "E_MODEL_INVALID", AGENT, 1
    ),
    Broken("model_unknown_provider", sub(AGENT, "openrouter:", "azure:"), "E_UNKNOWN_PROVIDER", AGENT, 1),
    Broken(
        "openai_compatible_without_base_url",
        sub(AGENT, "openrouter:openai/gpt-4.1-mini", "openai-compatible:llama3"),
        "E_BASE_URL_MISSING",
        AGENT,
        1,
    ),
    # ---- ids -------------------------------------------------------------------------------------
    Broken(
        "id_package_with_dash", sub(CONFIG, "package: demo_project", "package: demo-project"), "E_INVALID_ID", CONFIG, 1
    ),
    Broken("id_node_with_space", sub(HELPER, "id: shout", 'id: "sh out"'), "E_INVALID_ID", HELPER, 4),
    Broken("id_node_reserved_input", sub(HELPER, "id: shout", "id: input"), "E_INVALID_ID", HELPER, 4),
    Broken("id_node_reserved_context", sub(HELPER, "id: shout", "id: context"), "E_INVALID_ID", HELPER, 4),
    Broken("id_agent_file_name", {"agents/my agent.yaml": AGENT_YAML}, "E_INVALID_ID", "agents/my agent.yaml"),
    Broken(
        "id_flow_folder_name",
        {"flows/my.flow/flow.yaml": HELPER_FLOW_YAML, "flows/my.flow/helper.py": "x = 1\n"},
        "E_INVALID_ID",
        "flows/my.flow/flow.yaml",
    ),
    Broken(
        "id_dataset_file_name", {"datasets/2 tickets.yaml": DATASET_YAML}, "E_INVALID_ID", "datasets/2 tickets.yaml"
    ),
    Broken("id_agent_twice", {"agents/a.yml": AGENT_YAML}, "E_DUPLICATE_ID", "agents/a.yml"),
    Broken(
        "id_agent_reference_invalid",
        sub(MAIN, "    agent: a\n", '    agent: "a b"\n'),
        "E_INVALID_ID",
        MAIN,
        'agent: "a b"',
    ),
    # ---- files and code --------------------------------------------------------------------------
    Broken("file_prompt_missing", {"flows/main/classify.md": None}, "E_FILE_MISSING", MAIN, "prompt: classify.md"),
    Broken("file_prompt_is_directory", _prompt_is_directory, "E_FILE_MISSING", MAIN, "prompt: classify.md"),
    Broken(
        "file_prompt_not_utf8",
        {"flows/main/judge.md": b"Score \xff {{ text }}"},
        "E_FILE_UNREADABLE",
        MAIN,
        "prompt: judge.md",
    ),
    Broken("file_code_missing", {"flows/helper/helper.py": None}, "E_FILE_MISSING", HELPER, "code: helper.py"),
    Broken(
        "code_function_missing",
        sub(HELPER, "helper.py:shout", "helper.py:yell"),
        "E_CODE_FUNCTION_MISSING",
        HELPER,
        "code: helper.py",
    ),
    Broken(
        "code_name_not_callable",
        {"flows/helper/helper.py": "shout = 3\n"},
        "E_CODE_FUNCTION_MISSING",
        HELPER,
        "code: helper.py",
    ),
    Broken(
        "code_syntax_error",
        {"flows/main/enrich.py": ENRICH_PY.replace("def merge(a: float, b: float)", "def merge(a b)")},
        "E_CODE_IMPORT",
        "flows/main/enrich.py",
        8,
    ),
    Broken(
        "code_raises_on_import",
        {"flows/helper/helper.py": "import json\n\nraise RuntimeError('boom')\n"},
        "E_CODE_IMPORT",
        "flows/helper/helper.py",
        3,
    ),
    Broken(
        "code_imports_missing_module",
        {"flows/helper/helper.py": "import no_such_module_xyz\n"},
        "E_CODE_IMPORT",
        "flows/helper/helper.py",
        1,
    ),
    Broken(
        "code_exits_on_import",
        {"flows/helper/helper.py": "import sys\nsys.exit(2)\n"},
        "E_CODE_IMPORT",
        "flows/helper/helper.py",
        2,
    ),
    Broken(
        "code_ref_without_function",
        sub(HELPER, "helper.py:shout", "helper.py"),
        "E_FUNCTION_REF",
        HELPER,
        "code: helper.py",
    ),
    Broken(
        "code_ref_not_python",
        sub(HELPER, "helper.py:shout", "helper.js:shout"),
        "E_FUNCTION_REF",
        HELPER,
        "code: helper.js",
    ),
    Broken(
        "code_signature_mismatch",
        sub(HELPER, "inputs: {text: $input.text}", "inputs: {words: $input.text}"),
        "E_CODE_SIGNATURE",
        HELPER,
        "inputs:",
    ),
    Broken(
        "code_signature_missing_argument",
        sub(HELPER, "inputs: {text: $input.text}", "inputs: {}"),
        "E_CODE_SIGNATURE",
        HELPER,
        "code: helper.py",
    ),
    Broken("simulator_file_missing", {"sim/agents.py": None}, "E_FILE_MISSING", AGENT, 9),
    Broken(
        "simulator_function_missing",
        sub(AGENT, "agents.py:answer", "agents.py:reply"),
        "E_CODE_FUNCTION_MISSING",
        AGENT,
        9,
    ),
    Broken(
        "simulator_module_form_missing",
        sub(AGENT, "sim/agents.py:answer", "sim.robots:answer"),
        "E_FILE_MISSING",
        AGENT,
        9,
    ),
    Broken("simulator_bad_ref", sub(AGENT, "sim/agents.py:answer", "sim/agents.py"), "E_FUNCTION_REF", AGENT, 9),
    Broken(
        "simulator_import_fails",
        {"sim/agents.py": "def answer(request):\n    return 1\n1 / 0\n"},
        "E_CODE_IMPORT",
        "sim/agents.py",
        3,
    ),
    Broken("flow_folder_without_flow_yaml", _flow_folder_without_yaml, "E_FILE_MISSING", "flows/empty"),
    Broken("project_without_aqven_yaml", {CONFIG: None}, "E_PROJECT_MISSING", CONFIG),
    # ---- paths -----------------------------------------------------------------------------------
    Broken(
        "path_prompt_leaves_project",
        sub(MAIN, "prompt: classify.md", "prompt: ../../../classify.md"),
        "E_PATH_OUTSIDE_PROJECT",
        MAIN,
        "prompt: ../../../",
    ),
    Broken(
        "path_prompt_absolute",
        sub(MAIN, "prompt: classify.md", "prompt: /etc/hostname"),
        "E_PATH_OUTSIDE_PROJECT",
        MAIN,
        "prompt: /etc",
    ),
    Broken(
        "path_code_leaves_project",
        sub(HELPER, "helper.py:shout", "../../../helper.py:shout"),
        "E_PATH_OUTSIDE_PROJECT",
        HELPER,
        "code: ../",
    ),
    Broken(
        "path_simulator_leaves_project",
        sub(AGENT, "sim/agents.py:answer", "../sim/agents.py:answer"),
        "E_PATH_OUTSIDE_PROJECT",
        AGENT,
        9,
    ),
    Broken("path_prompt_symlink_outside", _symlink_prompt, "E_PATH_OUTSIDE_PROJECT", MAIN, "prompt: classify.md"),
    Broken(
        "path_prompt_nul_byte",
        sub(MAIN, "prompt: classify.md", 'prompt: "class\\0ify.md"'),
        "E_PATH_INVALID",
        MAIN,
        'prompt: "class',
    ),
    # ---- references ------------------------------------------------------------------------------
    Broken("unknown_agent", sub(MAIN, "    agent: a\n", "    agent: gpt\n"), "E_UNKNOWN_AGENT", MAIN, "agent: gpt"),
    Broken(
        "unknown_agent_broken_file",
        sub(AGENT, "temperature: 0.3", "temperature: 9"),
        "E_UNKNOWN_AGENT",
        MAIN,
        ("agent: a", 1),
    ),
    Broken("unknown_flow_in_call", sub(MAIN, "flow: helper", "flow: helpr"), "E_UNKNOWN_FLOW", MAIN, "flow: helpr"),
    Broken(
        "unknown_node_in_binding",
        sub(MAIN, "label: $classify.out.label\n", "label: $clasify.out.label\n"),
        "E_UNKNOWN_NODE",
        MAIN,
        "label: $clasify",
    ),
    Broken(
        "unknown_node_in_nested_literal",
        sub(HELPER, "inputs: {text: $input.text}", "inputs: {text: [$nope.out]}"),
        "E_UNKNOWN_NODE",
        HELPER,
        "inputs:",
    ),
    Broken("unknown_node_in_result", add(HELPER, "result: $shoot.out\n"), "E_UNKNOWN_NODE", HELPER, "result:"),
    Broken(
        "binding_into_group_child",
        sub(MAIN, "score: $panel.out}", "score: $judge_1.out}"),
        "E_BINDING_SCOPE",
        MAIN,
        "score: $judge_1",
    ),
    Broken(
        "binding_result_into_group_child",
        sub(MAIN, "result: $finish.out", "result: $merge.out"),
        "E_BINDING_SCOPE",
        MAIN,
        ("result: $merge", 2),
    ),
    Broken(
        "binding_self_reference",
        sub(HELPER, "inputs: {text: $input.text}", "inputs: {text: $shout.out}"),
        "E_BINDING_CYCLE",
        HELPER,
        "inputs:",
    ),
    Broken("binding_two_node_cycle", {HELPER: TWO_NODE_CYCLE}, "E_BINDING_CYCLE", HELPER),
    Broken(
        "binding_child_reads_its_group",
        sub(MAIN, "inputs: {a: $judge_1.out.score,", "inputs: {a: $panel.out,"),
        "E_BINDING_CYCLE",
        MAIN,
        "inputs: {a: $panel",
    ),
    Broken(
        "binding_group_result_reads_itself",
        sub(MAIN, "result: $merge.out", "result: $panel.out"),
        "E_BINDING_CYCLE",
        MAIN,
        "result: $panel",
    ),
    Broken("binding_syntax_no_out", sub(HELPER, "$input.text", "$shout"), "E_BINDING_SYNTAX", HELPER, "inputs:"),
    Broken(
        "binding_syntax_double_dot", sub(HELPER, "$input.text", "$input..text"), "E_BINDING_SYNTAX", HELPER, "inputs:"
    ),
    Broken("binding_syntax_bare_dollar", sub(HELPER, "$input.text", '"$"'), "E_BINDING_SYNTAX", HELPER, "inputs:"),
    Broken(
        "binding_syntax_dollar_literal", sub(HELPER, "$input.text", '"$5.00"'), "E_BINDING_SYNTAX", HELPER, "inputs:"
    ),
    Broken("binding_syntax_result", add(HELPER, "result: shout\n"), "E_BINDING_SYNTAX", HELPER, "result:"),
    Broken(
        "binding_field_not_in_output",
        sub(MAIN, "$classify.out.label\n", "$classify.out.lable\n"),
        "E_BINDING_FIELD",
        MAIN,
        "label: $classify.out.lable",
    ),
    Broken(
        "binding_field_not_in_input",
        sub(MAIN, "tier: $input.tier", "tier: $input.level"),
        "E_BINDING_FIELD",
        MAIN,
        "tier: $input.level",
    ),
    Broken(
        "binding_field_of_scalar",
        sub(MAIN, "score: $panel.out}", "score: $panel.out.value}"),
        "E_BINDING_FIELD",
        MAIN,
        "score: $panel",
    ),
    Broken(
        "call_input_missing",
        sub(
            MAIN,
            "inputs: {text: $input.ticket, priority: $enrich.out.priority}",
            "inputs: {priority: $enrich.out.priority}",
        ),
        "E_BINDING_TYPE",
        MAIN,
        "inputs: {priority",
    ),
    Broken(
        "call_input_unknown",
        sub(MAIN, "priority: $enrich.out.priority}", "priority: $enrich.out.priority, urgent: true}"),
        "E_BINDING_TYPE",
        MAIN,
        "urgent: true",
    ),
    Broken(
        "call_input_literal_mistyped",
        sub(MAIN, "priority: $enrich.out.priority}", 'priority: "high"}'),
        "E_BINDING_TYPE",
        MAIN,
        'priority: "high"',
    ),
    Broken(
        "call_input_binding_mistyped",
        sub(MAIN, "priority: $enrich.out.priority}", "priority: $input.ticket}"),
        "E_BINDING_TYPE",
        MAIN,
        "priority: $input.ticket",
    ),
    Broken(
        "call_input_object_to_string",
        sub(MAIN, "inputs: {text: $input.ticket, priority", "inputs: {text: $classify.out, priority"),
        "E_BINDING_TYPE",
        MAIN,
        "text: $classify.out",
    ),
    Broken(
        "call_flow_takes_string",
        {
            HELPER: HELPER_FLOW_YAML.replace('input: {text: string, priority: "integer?"}', "input: string").replace(
                "$input.text", "$input"
            )
        },
        "E_BINDING_TYPE",
        MAIN,
        "flow: helper",
    ),
    Broken(
        "result_type_vs_output",
        sub(HELPER, "\noutput: string\n", "\noutput: integer\n"),
        "E_BINDING_TYPE",
        HELPER,
        "output: integer",
    ),
    Broken(
        "result_object_missing_field",
        sub(MAIN, "output: {reply: string, ok: boolean}\nnodes", "output: {reply: string, score: number}\nnodes"),
        "E_BINDING_TYPE",
        MAIN,
        "result: $finish.out",
    ),
    Broken(
        "duplicate_node_top_level",
        sub(MAIN, "  - id: finish\n", "  - id: classify\n"),
        "E_DUPLICATE_NODE",
        MAIN,
        ("id: classify", 2),
    ),
    Broken(
        "duplicate_node_in_group",
        sub(MAIN, "      - id: judge_2\n", "      - id: enrich\n"),
        "E_DUPLICATE_NODE",
        MAIN,
        ("id: enrich", 2),
    ),
    Broken(
        "duplicate_node_within_group",
        sub(MAIN, "      - id: judge_2\n", "      - id: judge_1\n"),
        "E_DUPLICATE_NODE",
        MAIN,
        ("id: judge_1", 2),
    ),
    Broken(
        "duplicate_case_name",
        sub(DATASET, "name: flicker", "name: refund_late"),
        "E_DUPLICATE_CASE",
        DATASET,
        ("name: refund_late", 2),
    ),
    Broken(
        "empty_group",
        add(HELPER, "  - id: nothing\n    kind: group\n    nodes: []\n"),
        "E_EMPTY_GROUP",
        HELPER,
        "nodes: []",
    ),
    Broken(
        "call_cycle_self",
        add(HELPER, "  - id: again\n    kind: call\n    flow: helper\n    inputs: {text: $input.text}\n"),
        "E_CALL_CYCLE",
        HELPER,
        "flow: helper",
    ),
    Broken(
        "call_cycle_two_flows",
        {
            "flows/ping/flow.yaml": "input: {text: string}\nnodes:\n  - id: p\n    kind: call\n    flow: pong\n"
            "    inputs: {text: $input.text}\n",
            "flows/pong/flow.yaml": "input: {text: string}\nnodes:\n  - id: q\n    kind: call\n    flow: ping\n"
            "    inputs: {text: $input.text}\n",
        },
        "E_CALL_CYCLE",
        "flows/pong/flow.yaml",
        5,
    ),
    # ---- types -----------------------------------------------------------------------------------
    Broken(
        "type_shorthand_unknown",
        sub(HELPER, "\noutput: string\n", "\noutput: strng\n"),
        "E_TYPE_INVALID",
        HELPER,
        "output: strng",
    ),
    Broken(
        "type_shorthand_nested_unknown",
        sub(MAIN, "output: {label: string}", "output: {label: text}"),
        "E_TYPE_INVALID",
        MAIN,
        "output: {label: text}",
    ),
    Broken(
        "type_array_two_items",
        sub(HELPER, "\noutput: string\n", "\noutput: [string, integer]\n"),
        "E_TYPE_INVALID",
        HELPER,
        "output: [string",
    ),
    Broken(
        "type_array_block_nested",
        sub(HELPER, "\noutput: string\n", "\noutput:\n  items:\n    - strng\n"),
        "E_TYPE_INVALID",
        HELPER,
        "- strng",
    ),
    Broken(
        "type_number_literal", sub(HELPER, "\noutput: string\n", "\noutput: 3\n"), "E_TYPE_INVALID", HELPER, "output: 3"
    ),
    Broken(
        "type_json_schema_invalid",
        sub(HELPER, "\noutput: string\n", "\noutput: {type: object, required: true}\n"),
        "E_TYPE_INVALID",
        HELPER,
        "output: {type",
    ),
    Broken(
        "type_json_schema_bad_type",
        sub(HELPER, "\noutput: string\n", "\noutput: {type: text}\n"),
        "E_TYPE_INVALID",
        HELPER,
        "output: {type",
    ),
    Broken(
        "type_field_without_name",
        sub(MAIN, "output: {label: string}", 'output: {"?": string}'),
        "E_TYPE_INVALID",
        MAIN,
        'output: {"?"',
    ),
    # ---- prompts ---------------------------------------------------------------------------------
    Broken(
        "prompt_placeholder_unbound",
        {"flows/main/classify.md": "Classify {{ ticket }} for {{ customer }}\n"},
        "E_PROMPT_UNBOUND",
        MAIN,
        "prompt: classify.md",
    ),
    Broken(
        "prompt_placeholder_after_input_renamed",
        sub(MAIN, "inputs: {ticket: $input.ticket}", "inputs: {text: $input.ticket}"),
        "E_PROMPT_UNBOUND",
        MAIN,
        "prompt: classify.md",
    ),
    # ---- local settings --------------------------------------------------------------------------
    Broken(
        "local_unknown_key",
        {".aqven/local.yaml": "simulate: true\nsimulated: true\n"},
        "E_UNKNOWN_KEY",
        ".aqven/local.yaml",
        2,
    ),
    Broken("local_wrong_type", {".aqven/local.yaml": "simulate: maybe\n"}, "E_WRONG_TYPE", ".aqven/local.yaml", 1),
    Broken("local_not_mapping", {".aqven/local.yaml": "- simulate\n"}, "E_NOT_MAPPING", ".aqven/local.yaml", 1),
    Broken(
        "local_spend_cap_text",
        {".aqven/local.yaml": "research:\n  spend_cap_usd: lots\n"},
        "E_WRONG_TYPE",
        ".aqven/local.yaml",
        2,
    ),
    Broken("local_yaml_syntax", {".aqven/local.yaml": "simulate: [\n"}, "E_YAML_SYNTAX", ".aqven/local.yaml"),
]


def expected_line(files: dict[str, str | bytes], file: str | None, line: Line) -> int | None:
    if line is None or isinstance(line, int):
        return line
    assert file is not None
    text = files[file]
    assert isinstance(text, str)
    needle, occurrence = (line, 1) if isinstance(line, str) else line
    return line_of(text, needle, occurrence)


def build(root: Path, case: Broken) -> dict[str, str | bytes]:
    if callable(case.change):
        files = project_files()
        write_files(root, files)
        case.change(root)
    else:
        files = project_files(case.change)
        write_files(root, files)
    return files


def test_the_base_project_is_clean(tmp_path: Path) -> None:
    root = write_files(tmp_path / "p", project_files())
    project, diagnostics = check_project(root)
    assert diagnostics == []
    assert set(project.flows) == {"main", "helper"}
    assert set(project.agents) == {"a"} and set(project.datasets) == {"d"}


def test_there_are_many_distinct_broken_projects() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 150


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_project_yields_its_diagnostic(tmp_path: Path, case: Broken) -> None:
    root = tmp_path / "p"
    files = build(root, case)
    _, diagnostics = check_project(root)
    assert_well_formed(diagnostics)
    rendered = "\n".join(d.render() for d in diagnostics)
    matching = [d for d in diagnostics if d.code == case.code]
    assert matching, f"expected {case.code}, got:\n{rendered}"
    assert any(d.severity == "error" for d in diagnostics), rendered
    if case.file is not None:
        matching = [d for d in matching if d.file == case.file]
        assert matching, f"expected {case.code} in {case.file}, got:\n{rendered}"
    want = expected_line(files, case.file, case.line)
    if want is not None:
        assert want in [d.line for d in matching], f"expected {case.code} at {case.file}:{want}, got:\n{rendered}"


def test_a_crash_inside_the_check_becomes_e_internal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aqven.engine.check as check

    def boom(project: object) -> list[Diagnostic]:
        raise RuntimeError("boom")

    boom.__name__ = "check_agents"
    monkeypatch.setattr(check, "check_agents", boom)
    root = write_files(tmp_path / "p", project_files())
    _, diagnostics = check.check_project(root)
    assert [d.code for d in diagnostics] == ["E_INTERNAL"]
    assert "check_agents" in diagnostics[0].message and "RuntimeError: boom" in diagnostics[0].message


def test_a_root_that_is_a_file_is_not_a_project(tmp_path: Path) -> None:
    (tmp_path / "aqven.yaml").write_text("package: x\n", encoding="utf-8")
    _, diagnostics = check_project(tmp_path / "aqven.yaml")
    assert [d.code for d in diagnostics] == ["E_PROJECT_MISSING"]


def test_an_empty_local_yaml_is_fine(tmp_path: Path) -> None:
    root = write_files(tmp_path / "p", project_files({".aqven/local.yaml": "# nothing here\n"}))
    assert check_project(root)[1] == []
