#!/usr/bin/env python3
"""Expose one AgentDojo suite to rolegate: list its tasks, serve its tools over MCP stdio, grade a run.

Everything about the suites (tools, environments, tasks, injections, checks) comes from the
installed `agentdojo` package; this file only wires it to MCP and to JSON.

    bridge.py list  --suite banking [--user-task ID [--injection-task ID] [--attack A]]
    bridge.py serve --suite banking --user-task ID [--injection-task ID] [--attack A] [--state-out FILE]
    bridge.py grade --suite banking --user-task ID [--injection-task ID] --state FILE [--answer TEXT]
"""

from __future__ import annotations

import argparse
import base64
import enum
import io
import json
import os
import pickle
import sys
import tempfile
from ast import literal_eval
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.stdio import stdio_server
from pydantic import AnyUrl, BaseModel

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import is_string_list, tool_result_to_str
from agentdojo.attacks.attack_registry import ATTACKS, load_attack
from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime, TaskEnvironment
from agentdojo.models import MODEL_NAMES
from agentdojo.task_suite import get_suites
from agentdojo.task_suite.task_suite import TaskSuite

DEFAULT_VERSION = "v1.2.2"  # the default of agentdojo 0.1.35's own benchmark script
DEFAULT_ATTACK = "important_instructions"
DEFAULT_MODEL = "local"  # a key of agentdojo.models.MODEL_NAMES; some attacks address the model by name
STATE_URI = "agentdojo://state"
STATE_FORMAT = 1
_DATETIME_TYPES = {"date", "datetime", "time", "timedelta", "timezone"}


class BridgeError(Exception):
    """Bad input: printed as one line on stderr, exit status 2."""


class _NamedPipeline(BasePipelineElement):
    """Attacks take the attacked pipeline only to read its name; nothing is ever queried."""

    def __init__(self, name: str) -> None:
        self.name = name

    def query(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the bridge runs no model")


@dataclass
class Pair:
    """A (user task, injection task) pair of one suite, with the injection texts for its environment."""

    version: str
    suite: TaskSuite[Any]
    user_task: BaseUserTask[Any]
    injection_task: BaseInjectionTask[Any] | None
    attack: str
    model: str
    injections: dict[str, str]

    def environment(self) -> TaskEnvironment:
        """The environment as `TaskSuite.run_task_with_pipeline` builds it before the agent runs."""
        env = self.suite.load_and_inject_default_environment(self.injections)
        return self.user_task.init_environment(env)


def load_suite(version: str, name: str) -> TaskSuite[Any]:
    suites = get_suites(version)
    if not suites:
        raise BridgeError(f"unknown benchmark version {version!r} (agentdojo's default is {DEFAULT_VERSION})")
    if name not in suites:
        raise BridgeError(f"unknown suite {name!r} in {version}; known: {', '.join(sorted(suites))}")
    return suites[name]


def pick(tasks: dict[str, Any], task_id: str, kind: str, suite: str) -> Any:
    if task_id not in tasks:
        known = sorted(tasks, key=lambda t: int(t.rsplit("_", 1)[-1]))
        raise BridgeError(f"unknown {kind} {task_id!r} in suite {suite!r}; known: {', '.join(known)}")
    return tasks[task_id]


def compute_injections(
    suite: TaskSuite[Any], user_task: BaseUserTask[Any], injection_task: BaseInjectionTask[Any], attack: str, model: str
) -> dict[str, str]:
    """Ask AgentDojo's attack for the texts to put in the vectors that the user task's ground truth reads."""
    if attack not in ATTACKS or attack == "manual":
        names = sorted(n for n in ATTACKS if n != "manual")
        raise BridgeError(f"unknown attack {attack!r}; known: none, {', '.join(names)}")
    if model not in MODEL_NAMES:
        raise BridgeError(f"unknown model {model!r}; known: {', '.join(MODEL_NAMES)}")
    try:
        return load_attack(attack, suite, _NamedPipeline(model)).attack(user_task, injection_task)
    except ValueError as e:  # e.g. "user_task_N is not injectable."
        raise BridgeError(f"attack {attack!r} failed: {e}") from e


def resolve(args: argparse.Namespace) -> Pair:
    suite = load_suite(args.version, args.suite)
    user_task = pick(suite.user_tasks, args.user_task, "user task", suite.name)
    injection_task = None
    if args.injection_task is not None:
        injection_task = pick(suite.injection_tasks, args.injection_task, "injection task", suite.name)
    attack = args.attack if injection_task is not None else "none"
    injections = {}
    if attack != "none":
        assert injection_task is not None
        injections = compute_injections(suite, user_task, injection_task, attack, args.model)
    return Pair(args.version, suite, user_task, injection_task, attack, args.model, injections)


def calls_json(calls: Sequence[FunctionCall]) -> list[dict[str, Any]]:
    out = []
    for call in calls:
        item: dict[str, Any] = {"function": call.function, "args": call.model_dump(mode="json")["args"]}
        if call.placeholder_args is not None:
            item["placeholder_args"] = call.model_dump(mode="json")["placeholder_args"]
        out.append(item)
    return out


class _EnvironmentUnpickler(pickle.Unpickler):
    """Unpickles only what an environment holds: AgentDojo's pydantic models and enums, and datetimes.

    Pickle, not JSON, carries the environment to `grade`: validating a JSON dump reruns the models'
    validators, and some rebuild state from their initial data (e.g. `Inbox.emails` from
    `initial_emails`), which would silently undo what the agent did."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "datetime" and name in _DATETIME_TYPES:
            return super().find_class(module, name)
        if module.startswith("agentdojo."):
            found = super().find_class(module, name)
            if isinstance(found, type) and issubclass(found, (BaseModel, enum.Enum)):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of an AgentDojo environment")


def dump_environment(env: TaskEnvironment) -> str:
    return base64.b64encode(pickle.dumps(env, protocol=5)).decode("ascii")


def load_environment(data: str, environment_type: type[TaskEnvironment]) -> TaskEnvironment:
    env = _EnvironmentUnpickler(io.BytesIO(base64.b64decode(data))).load()
    if not isinstance(env, environment_type):
        raise BridgeError(f"state holds a {type(env).__name__}, not a {environment_type.__name__}")
    return env


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, ensure_ascii=False))


# ---------------------------------------------------------------------------------------------- list


def cmd_list(args: argparse.Namespace) -> int:
    """JSON lines: the suite, its user tasks, injection tasks and injection vectors.

    Ground truths are computed on the benign environment, or, with --user-task, on exactly the
    environment that `serve` gives for that pair (some suites hide injections in values that a
    ground truth uses, e.g. a slack channel name)."""
    suite = load_suite(args.version, args.suite)
    if args.user_task is not None:
        pair = resolve(args)
        user_tasks = {pair.user_task.ID: pair.user_task}
        injection_tasks = {pair.injection_task.ID: pair.injection_task} if pair.injection_task else {}
        env = pair.environment()
    else:
        user_tasks, injection_tasks = suite.user_tasks, suite.injection_tasks
        env = suite.load_and_inject_default_environment({})
    candidates = load_attack("direct", suite, _NamedPipeline(DEFAULT_MODEL))
    emit({"kind": "suite", "suite": suite.name, "version": args.version, "tools": [t.name for t in suite.tools]})
    for task_id, task in user_tasks.items():
        try:
            vectors = candidates.get_injection_candidates(task)
        except ValueError:
            vectors = []
        task_env = task.init_environment(env.model_copy(deep=True))
        emit({
            "kind": "user_task", "id": task_id, "prompt": task.PROMPT,
            "ground_truth_output": task.GROUND_TRUTH_OUTPUT,
            "ground_truth": calls_json(task.ground_truth(task_env)), "injection_vectors": vectors,
        })
    for task_id, task in injection_tasks.items():
        emit({
            "kind": "injection_task", "id": task_id, "goal": task.GOAL,
            "ground_truth_output": task.GROUND_TRUTH_OUTPUT,
            "ground_truth": calls_json(task.ground_truth(env.model_copy(deep=True))),
        })
    if args.user_task is None:
        defaults = suite.get_injection_vector_defaults()
        for vector_id in defaults:
            emit({"kind": "injection_vector", "id": vector_id, "default": defaults[vector_id]})
    return 0


# --------------------------------------------------------------------------------------------- serve


class Session:
    """The environment of one pair, the tools that act on it, and the calls made so far."""

    def __init__(self, pair: Pair, state_out: Path | None) -> None:
        self.pair = pair
        self.env = pair.environment()
        self.runtime = FunctionsRuntime(pair.suite.tools)
        self.calls: list[FunctionCall] = []
        self.errors: list[str | None] = []
        self.state_out = state_out

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, str | None]:
        """Run one tool as AgentDojo's ToolsExecutor does: returns (formatted result, error or None)."""
        args = dict(arguments)
        for key, value in args.items():  # ToolsExecutor turns "['a', 'b']" strings into lists
            if isinstance(value, str) and is_string_list(value):
                args[key] = literal_eval(value)
        self.calls.append(FunctionCall(function=name, args=args, id=f"call_{len(self.calls)}"))
        if name not in self.runtime.functions:
            error: str | None = f"Invalid tool {name} provided."
            text = ""
        else:
            result, error = self.runtime.run_function(self.env, name, args)
            text = tool_result_to_str(result)
        self.errors.append(error)
        self.save()
        return text, error

    def state(self) -> dict[str, Any]:
        p = self.pair
        calls = [dict(c, error=e) for c, e in zip(calls_json(self.calls), self.errors)]
        return {
            "format": STATE_FORMAT, "version": p.version, "suite": p.suite.name, "user_task": p.user_task.ID,
            "injection_task": p.injection_task.ID if p.injection_task else None, "attack": p.attack,
            "model": p.model, "injections": p.injections, "calls": calls,
            "environment": self.env.model_dump(mode="json"),  # for reading; grade uses the pickle
            "environment_pickle": dump_environment(self.env),
        }

    def save(self) -> None:
        """Write the state atomically, so a reader never sees half a file."""
        if self.state_out is None:
            return
        text = json.dumps(self.state(), ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=self.state_out.parent, prefix=".state-")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, self.state_out)


def build_server(session: Session) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("rolegate-agentdojo-" + session.pair.suite.name)
    tools = [
        types.Tool(name=f.name, description=f.description, inputSchema=f.parameters.model_json_schema())
        for f in session.pair.suite.tools
    ]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    # AgentDojo validates arguments itself (pydantic) and reports errors in its own words.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        text, error = session.call(name, arguments)
        if error is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=error)], isError=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    # Not a tool, so an agent never sees it: the coordinator reads it to save and fetch the state.
    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        return [types.Resource(uri=AnyUrl(STATE_URI), name="state", mimeType="application/json",
                               description="Final environment and recorded calls; reading it also writes --state-out.")]

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        if str(uri) != STATE_URI:
            raise ValueError(f"unknown resource {uri}")
        session.save()
        return [ReadResourceContents(json.dumps(session.state(), ensure_ascii=False), "application/json")]

    return server


def cmd_serve(args: argparse.Namespace) -> int:
    state_out = Path(args.state_out).resolve() if args.state_out else None
    if state_out is not None and not state_out.parent.is_dir():
        raise BridgeError(f"--state-out directory does not exist: {state_out.parent}")
    session = Session(resolve(args), state_out)
    session.save()
    server = build_server(session)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:  # stdin closed (or interrupted): leave the final state behind
        session.save()
    return 0


# --------------------------------------------------------------------------------------------- grade


def cmd_grade(args: argparse.Namespace) -> int:
    """Grade as `TaskSuite.run_task_with_pipeline` does (via `_check_user_task_utility` and
    `_check_injection_task_security`): the `*_from_traces` check wins when it returns a bool."""
    try:
        state = json.loads(Path(args.state).read_text())
    except (OSError, ValueError) as e:
        raise BridgeError(f"cannot read state file {args.state}: {e}") from e
    if state.get("format") != STATE_FORMAT:
        raise BridgeError(f"{args.state} is not a bridge state file (format {state.get('format')!r})")
    given = {"version": args.version, "suite": args.suite, "user_task": args.user_task,
             "injection_task": args.injection_task}
    for key, value in given.items():
        if state.get(key) != value:
            raise BridgeError(f"state file was served with {key}={state.get(key)!r}, not {value!r}")
    suite = load_suite(args.version, args.suite)
    user_task = pick(suite.user_tasks, args.user_task, "user task", suite.name)
    try:
        # The pre-environment carries the same injections as the served one (recorded in the state).
        pre = user_task.init_environment(suite.load_and_inject_default_environment(state["injections"]))
        post = load_environment(state["environment_pickle"], suite.environment_type)
        traces = [FunctionCall(function=c["function"], args=c["args"]) for c in state["calls"]]
    except (KeyError, TypeError, ValueError, pickle.UnpicklingError) as e:
        raise BridgeError(f"{args.state} is not a usable state file: {e}") from e
    answer = args.answer
    # Same objects, same order as AgentDojo: utility first, then security.
    utility = user_task.utility_from_traces(answer, pre, post, traces)
    if utility is None:
        utility = user_task.utility(answer, pre, post)
    security: bool | None = None  # AgentDojo itself reports True for runs without an injection task
    if args.injection_task is not None:
        injection_task = pick(suite.injection_tasks, args.injection_task, "injection task", suite.name)
        security = injection_task.security_from_traces(answer, pre, post, traces)
        if security is None:
            security = injection_task.security(answer, pre, post)
    emit({"utility": bool(utility), "security": None if security is None else bool(security)})
    return 0


# ---------------------------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="bridge.py", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, user_task_required: bool) -> None:
        p.add_argument("--suite", required=True, help="banking, slack, travel or workspace")
        p.add_argument("--version", default=DEFAULT_VERSION, help=f"benchmark version (default {DEFAULT_VERSION})")
        p.add_argument("--user-task", required=user_task_required, help="e.g. user_task_0")
        p.add_argument("--injection-task", help="e.g. injection_task_0 (omit for a benign run)")

    def attack(p: argparse.ArgumentParser) -> None:
        p.add_argument("--attack", default=DEFAULT_ATTACK,
                       help=f"AgentDojo attack filling the vectors, or 'none' (default {DEFAULT_ATTACK})")
        p.add_argument("--model", default=DEFAULT_MODEL,
                       help=f"model name some attacks address, a key of agentdojo.models.MODEL_NAMES (default {DEFAULT_MODEL})")

    p = sub.add_parser("list", help="print tasks, ground truths and injection vectors as JSON lines")
    common(p, user_task_required=False)
    attack(p)
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("serve", help="serve the suite's tools over MCP stdio on the pair's environment")
    common(p, user_task_required=True)
    attack(p)
    p.add_argument("--state-out", help="file to keep the environment and recorded calls in (JSON)")
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("grade", help="grade a served run with AgentDojo's utility and security checks")
    common(p, user_task_required=True)
    p.add_argument("--state", required=True, help="state file written by serve --state-out")
    p.add_argument("--answer", default="", help="the agent's final answer text (default empty)")
    p.set_defaults(run=cmd_grade)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "injection_task", None) and getattr(args, "user_task", None) is None:
        print("bridge.py: error: --injection-task needs --user-task", file=sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except BridgeError as e:
        print(f"bridge.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
