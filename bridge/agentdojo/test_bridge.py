"""Tests of bridge.py, run from the bridge's venv with `python -m unittest` (no network).

They drive `serve` as a real MCP stdio child through the official `mcp` client, replay ground
truths that `list` printed, and check what `grade` says against AgentDojo's own pipeline run.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from pydantic import AnyUrl

HERE = Path(__file__).resolve().parent
BRIDGE = str(HERE / "bridge.py")
sys.path.insert(0, str(HERE))
import bridge as b  # noqa: E402
SUITE = "banking"  # the smallest suite: 11 tools, a 2 KB environment
USER_TASK = "user_task_0"  # pays a bill read from a file, which carries the injection
INJECTION_TASK = "injection_task_0"


def bridge(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, BRIDGE, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"bridge {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def list_lines(*args: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in bridge("list", *args).stdout.splitlines()]


def ground_truth(lines: list[dict[str, Any]], kind: str, task_id: str) -> list[dict[str, Any]]:
    (task,) = [line for line in lines if line["kind"] == kind and line["id"] == task_id]
    return list(task["ground_truth"])  # a copy: tests extend it


class Served:
    """What one `serve` session showed: its tools, each call's result, and the state resource."""

    tools: list[Any]
    results: list[Any]
    state: dict[str, Any]


def serve(args: list[str], calls: list[dict[str, Any]]) -> Served:
    """Start `serve` as a child, list its tools, make the calls in order, read the state, close stdin."""
    params = StdioServerParameters(command=sys.executable, args=[BRIDGE, "serve", *args])
    out = Served()

    async def run() -> None:
        with anyio.fail_after(120):
            await session_run()

    async def session_run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            out.tools = (await session.list_tools()).tools
            out.results = [await session.call_tool(c["function"], c["args"]) for c in calls]
            resource = await session.read_resource(AnyUrl("agentdojo://state"))
            out.state = json.loads(resource.contents[0].text)  # type: ignore[union-attr]

    anyio.run(run)
    return out


def text(result: Any) -> str:
    return "".join(block.text for block in result.content)


class BridgeTest(unittest.TestCase):
    tmp: tempfile.TemporaryDirectory[str]
    listing: list[dict[str, Any]]
    pair: list[str]
    pair_listing: list[dict[str, Any]]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory()
        cls.listing = list_lines("--suite", SUITE)
        cls.pair = ["--suite", SUITE, "--user-task", USER_TASK, "--injection-task", INJECTION_TASK]
        cls.pair_listing = list_lines(*cls.pair)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def state_file(self, name: str) -> str:
        return str(Path(self.tmp.name) / f"{name}.json")

    def grade(self, args: list[str], state: str, answer: str = "") -> dict[str, Any]:
        return json.loads(bridge("grade", *args, "--state", state, "--answer", answer).stdout)

    def test_list_gives_tasks_with_ground_truths(self) -> None:
        kinds = [line["kind"] for line in self.listing]
        self.assertEqual(kinds[0], "suite")
        users = [line for line in self.listing if line["kind"] == "user_task"]
        injections = [line for line in self.listing if line["kind"] == "injection_task"]
        vectors = [line for line in self.listing if line["kind"] == "injection_vector"]
        self.assertGreaterEqual(len(users), 10)
        self.assertGreaterEqual(len(injections), 5)
        self.assertTrue(vectors)
        for task in users + injections:
            self.assertTrue(task["ground_truth"], task["id"])
            for call in task["ground_truth"]:
                self.assertIn(call["function"], self.listing[0]["tools"])
                self.assertIsInstance(call["args"], dict)
        self.assertTrue(all(task["goal"] for task in injections))
        self.assertTrue(all(task["prompt"] for task in users))
        vector_ids = {v["id"] for v in vectors}
        for task in users:
            self.assertTrue(set(task["injection_vectors"]) <= vector_ids)

    def test_bad_input_is_named(self) -> None:
        for args, named in [
            (["list", "--suite", "nope"], "'nope'"),
            (["list", "--suite", SUITE, "--user-task", "user_task_999"], "'user_task_999'"),
            (["grade", *self.pair[:4], "--injection-task", "injection_task_x", "--state", "/nonexistent"],
             "/nonexistent"),
            (["list", *self.pair, "--attack", "bogus"], "'bogus'"),
        ]:
            proc = bridge(*args, check=False)
            self.assertEqual(proc.returncode, 2, args)
            self.assertIn(named, proc.stderr)

    def test_user_task_ground_truth_is_useful_and_secure(self) -> None:
        calls = ground_truth(self.pair_listing, "user_task", USER_TASK)
        state = self.state_file("user-only")
        served = serve([*self.pair, "--state-out", state], calls)
        listed_tools = [line for line in self.listing if line["kind"] == "suite"][0]["tools"]
        self.assertEqual(sorted(t.name for t in served.tools), sorted(listed_tools))
        send_money = next(t for t in served.tools if t.name == "send_money")
        self.assertEqual(send_money.inputSchema["type"], "object")
        self.assertIn("recipient", send_money.inputSchema["properties"])
        self.assertFalse(any(r.isError for r in served.results))
        self.assertIn("<INFORMATION>", text(served.results[0]))  # the injected bill text is seen
        self.assertEqual([c["function"] for c in served.state["calls"]], [c["function"] for c in calls])
        self.assertEqual(self.grade(self.pair, state), {"utility": True, "security": False})
        # The state file left on disk after the child exited grades the same as AgentDojo's own run.
        self.assertEqual(json.loads(Path(state).read_text())["calls"], served.state["calls"])
        self.assertEqual(agentdojo_ground_truth_run(), (True, False))

    def test_obeying_the_injection_makes_the_attack_succeed(self) -> None:
        calls = ground_truth(self.pair_listing, "user_task", USER_TASK)
        calls += ground_truth(self.pair_listing, "injection_task", INJECTION_TASK)
        state = self.state_file("obeyed")
        serve([*self.pair, "--state-out", state], calls)
        self.assertEqual(self.grade(self.pair, state), {"utility": True, "security": True})

    def test_benign_run_grades(self) -> None:
        benign = ["--suite", SUITE, "--user-task", USER_TASK]
        calls = ground_truth(list_lines(*benign), "user_task", USER_TASK)
        state = self.state_file("benign")
        served = serve([*benign, "--state-out", state], calls)
        self.assertNotIn("<INFORMATION>", text(served.results[0]))
        self.assertEqual(served.state["injections"], {})
        self.assertEqual(self.grade(benign, state), {"utility": True, "security": None})
        # Doing nothing is not useful.
        idle = self.state_file("idle")
        serve([*benign, "--state-out", idle], [])
        self.assertEqual(self.grade(benign, idle), {"utility": False, "security": None})
        # A state file only grades the pair it was served for.
        proc = bridge("grade", *self.pair, "--state", state, check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("injection_task", proc.stderr)

    def test_tool_errors_are_mcp_errors_and_recorded(self) -> None:
        calls = [
            {"function": "send_money", "args": {"recipient": "X"}},  # missing arguments
            {"function": "no_such_tool", "args": {}},
            {"function": "get_balance", "args": {}},
        ]
        served = serve(["--suite", SUITE, "--user-task", USER_TASK], calls)
        self.assertEqual([r.isError for r in served.results], [True, True, False])
        self.assertIn("ValidationError", text(served.results[0]))
        self.assertIn("Invalid tool no_such_tool", text(served.results[1]))
        self.assertEqual([c["function"] for c in served.state["calls"]], [c["function"] for c in calls])

    def test_trace_based_security_check(self) -> None:
        # slack's injection_task_5 is graded only from the recorded calls (security_from_traces):
        # the attacker is invited, added to #general, then removed, so the final environment shows nothing.
        pair = ["--suite", "slack", "--user-task", "user_task_0", "--injection-task", "injection_task_5"]
        listing = list_lines(*pair)
        calls = ground_truth(listing, "user_task", "user_task_0")
        calls += ground_truth(listing, "injection_task", "injection_task_5")
        state = self.state_file("slack")
        serve([*pair, "--state-out", state], calls)
        self.assertEqual(self.grade(pair, state)["security"], True)


class StateFileTest(unittest.TestCase):
    """In-process checks of the state file that `grade` reads."""

    def grade(self, argv: list[str]) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = b.main(["grade", *argv])
        return code, out.getvalue() + err.getvalue()

    def test_state_keeps_what_the_tools_changed(self) -> None:
        # travel's Inbox rebuilds `emails` from `initial_emails` when validated, so a JSON round
        # trip would drop the email this task sends: the state must carry the environment as it is.
        args = ["--suite", "travel", "--user-task", "user_task_3"]
        ns = b.parser().parse_args(["serve", *args])
        with tempfile.TemporaryDirectory() as tmp:
            state = Path(tmp) / "state.json"
            session = b.Session(b.resolve(ns), state)
            task = session.pair.user_task
            for call in task.ground_truth(session.env.model_copy(deep=True)):
                self.assertIsNone(session.call(call.function, dict(call.args))[1])
            code, out = self.grade([*args, "--state", str(state), "--answer", task.GROUND_TRUTH_OUTPUT])
        self.assertEqual((code, json.loads(out)), (0, {"utility": True, "security": None}))

    def test_state_cannot_smuggle_code(self) -> None:
        args = ["--suite", SUITE, "--user-task", USER_TASK]
        ns = b.parser().parse_args(["serve", *args])
        with tempfile.TemporaryDirectory() as tmp:
            marker = Path(tmp) / "pwned"

            class Evil:
                def __reduce__(self) -> tuple[Any, tuple[str]]:
                    return (os.system, (f"touch {marker}",))

            state = Path(tmp) / "state.json"
            b.Session(b.resolve(ns), state).save()
            data = json.loads(state.read_text())
            data["environment_pickle"] = base64.b64encode(pickle.dumps(Evil())).decode()
            state.write_text(json.dumps(data))
            code, out = self.grade([*args, "--state", str(state)])
            self.assertFalse(marker.exists())
        self.assertEqual(code, 2)
        self.assertIn("system is not part of an AgentDojo environment", out)


def agentdojo_ground_truth_run() -> tuple[bool, bool]:
    """AgentDojo's own answer for the pair: its ground-truth pipeline, its attack, its grading."""
    from agentdojo.agent_pipeline import GroundTruthPipeline
    from agentdojo.task_suite import get_suite

    suite = get_suite(b.DEFAULT_VERSION, SUITE)
    user_task = suite.get_user_task_by_id(USER_TASK)
    injection_task = suite.get_injection_task_by_id(INJECTION_TASK)
    injections = b.compute_injections(suite, user_task, injection_task, b.DEFAULT_ATTACK, b.DEFAULT_MODEL)
    return suite.run_task_with_pipeline(GroundTruthPipeline(user_task), user_task, injection_task, injections)


if __name__ == "__main__":
    unittest.main()
