"""Observations made from inside a test host's network namespace (the test process itself lives outside it):
`python tests/hosts/probe.py wait-http URL TIMEOUT_S`, `... runs API_URL`, `... wait-fresh-task SERVICE_URL
MIN_SCORED TIMEOUT_S`. Each prints one JSON document on stdout; exit 1 on timeout."""

from __future__ import annotations

import json
import sys
import time

import httpx


def wait_http(url: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(url, timeout=5)
            if r.status_code == 200:
                return {"url": url, "ok": True}
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.5)
    print(json.dumps({"url": url, "ok": False, "last": last}))
    sys.exit(1)


def _filter(api: str, what: str) -> list[dict]:
    out: list[dict] = []
    while True:
        page = httpx.post(f"{api}/{what}/filter", json={"limit": 200, "offset": len(out)}, timeout=30)
        page.raise_for_status()
        rows = page.json()
        out += rows
        if len(rows) < 200:
            return out


def runs(api: str) -> dict:
    """Every flow run and task run on the server: name, state type and name, run count."""
    def brief(r: dict) -> dict:
        state = r.get("state") or {}
        return {"id": r["id"], "name": r["name"], "state_type": state.get("type"), "state_name": state.get("name"),
                "run_count": r.get("run_count"), "flow_run_id": r.get("flow_run_id")}

    return {"flow_runs": [brief(r) for r in _filter(api, "flow_runs")],
            "task_runs": [brief(r) for r in _filter(api, "task_runs")]}


def wait_fresh_task(url: str, min_scored: int, timeout_s: float) -> dict:
    """Wait until the service has scored `min_scored` tasks and a new one has just started on a GPU (it was not
    running at the previous poll, 0.2 s earlier), so that a crash now surely interrupts a judgement."""
    deadline = time.monotonic() + timeout_s
    seen: set[str] | None = None  # what ran at the previous poll (None before the first)
    while time.monotonic() < deadline:
        try:
            lanes = httpx.get(f"{url}/health", timeout=5).json()["gpus"]
        except (httpx.HTTPError, ValueError, KeyError):
            time.sleep(0.2)
            continue
        scored = sum(g["tasks_scored"] for g in lanes)
        current = {g["current_task"] for g in lanes if g.get("current_task")}
        fresh = current - seen if seen is not None else set()
        if scored >= min_scored and fresh:
            return {"scored": scored, "running": sorted(current), "fresh": sorted(fresh)}
        seen = current
        time.sleep(0.2)
    print(json.dumps({"timeout": True}))
    sys.exit(1)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "wait-http":
        result = wait_http(args[0], float(args[1]))
    elif cmd == "runs":
        result = runs(args[0])
    elif cmd == "wait-fresh-task":
        result = wait_fresh_task(args[0], int(args[1]), float(args[2]))
    else:
        sys.exit(f"unknown probe command {cmd!r}")
    print(json.dumps(result))
