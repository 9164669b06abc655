"""What a person must see in the Prefect and MLflow UIs after a campaign, checked in a Playwright page.

The expected names come from the servers' APIs (flow runs, artifacts, MLflow runs), so the checks hold whatever the
run names are; what is checked is that the UI shows them where a person looks. Every page is screenshotted.
"""

from __future__ import annotations

from pathlib import Path

import httpx


class Shots:
    """Numbered full-page screenshots in one folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.taken: list[Path] = []

    def take(self, page, name: str) -> Path:
        path = self.root / f"{len(self.taken) + 1:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)
        return path


def _post(api: str, what: str) -> list[dict]:
    r = httpx.post(f"{api}/{what}/filter", json={"limit": 200}, timeout=30)
    r.raise_for_status()
    return r.json()


def check_prefect(page, ui: str, campaign_id: str, problems: list[str], shots: Shots) -> None:
    """Runs list names every trajectory; the campaign run's Artifacts tab lists the headline; the headline renders."""
    runs = _post(f"{ui}/api", "flow_runs")
    campaign = [r for r in runs if r["parent_task_run_id"] is None and "resume" not in r["name"]]
    trajectories = [r for r in runs if r["parent_task_run_id"] is not None]
    assert len(campaign) == 1 and len(trajectories) == len(problems), [r["name"] for r in runs]
    assert sorted(p for p in problems if any(p in r["name"] for r in trajectories)) == sorted(problems)
    page.goto(f"{ui}/runs")
    for run in trajectories + campaign:
        page.get_by_text(run["name"], exact=True).first.wait_for()
    shots.take(page, "prefect-runs")

    headline = [a for a in _post(f"{ui}/api", "artifacts")
                if a["flow_run_id"] == campaign[0]["id"] and a["type"] == "markdown"
                and (a["key"] or "").endswith("-headline")]
    assert len(headline) == 1, "no headline artifact on the campaign run"
    page.goto(f"{ui}/runs/flow-run/{campaign[0]['id']}")
    page.get_by_text(campaign[0]["name"], exact=True).first.wait_for()
    page.get_by_text("Artifacts", exact=True).first.click()
    page.get_by_text(headline[0]["key"], exact=True).first.wait_for()
    shots.take(page, "prefect-campaign-artifacts")
    page.goto(f"{ui}/artifacts/artifact/{headline[0]['id']}")
    page.get_by_role("table").first.wait_for()
    body = page.inner_text("body")
    for text in (campaign_id, "replay/demo", "hopper", "compiled"):
        assert text in body, f"{text!r} not on the headline artifact page"
    shots.take(page, "prefect-headline-artifact")


def _experiment(tracking_uri: str, campaign_id: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(f"ptxbench/{campaign_id}")
    assert exp is not None, f"no MLflow experiment ptxbench/{campaign_id}"
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if not r.data.tags.get("mlflow.parentRunId")]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and children
    return exp, parents[0], children


def check_mlflow_runs(page, ui: str, tracking_uri: str, campaign_id: str, shots: Shots) -> None:
    """The runs table shows the campaign run, expanding it shows every trajectory; a trajectory shows its metrics."""
    exp, parent, children = _experiment(tracking_uri, campaign_id)
    page.goto(f"{ui}/#/experiments/{exp.experiment_id}/runs")
    row = page.get_by_role("row").filter(has_text=parent.info.run_name)
    row.first.wait_for()
    names = [c.info.run_name for c in children]
    if not page.get_by_text(names[0], exact=True).count():  # children folded under the campaign run
        row.first.locator("button[data-component-id*='runnamecellrenderer']").first.click()
    for name in names:
        page.get_by_text(name, exact=True).first.wait_for()
    shots.take(page, "mlflow-runs")

    child = children[0]
    assert "compiled" in child.data.metrics, sorted(child.data.metrics)
    page.goto(f"{ui}/#/experiments/{exp.experiment_id}/runs/{child.info.run_id}")
    page.get_by_text(child.info.run_name, exact=True).first.wait_for()
    metrics = page.get_by_role("table").filter(has_text="compiled")
    metrics.first.wait_for()
    text = metrics.first.inner_text()
    for key in child.data.metrics:
        assert key in text, f"metric {key!r} not in the run page's metrics table"
    metrics.first.scroll_into_view_if_needed()
    shots.take(page, "mlflow-trajectory-run")


def check_mlflow_landing(page, ui: str, tracking_uri: str, campaign_id: str, shots: Shots) -> None:
    """From the experiments list, in the UI's "Model training" view (one click; the browser keeps it), opening the
    experiment lands on its runs. MLflow 3.17's default "GenAI" view opens every experiment on its trace overview
    ("Traces 0") whatever the experiment's `mlflow.experimentKind` tag says."""
    exp, parent, _ = _experiment(tracking_uri, campaign_id)
    page.goto(f"{ui}/#/experiments")
    page.get_by_text("Model training", exact=True).first.click()
    page.get_by_role("link", name=exp.name).first.click()
    page.wait_for_function(f"location.hash.startsWith('#/experiments/{exp.experiment_id}')")  # no load event
    try:
        page.get_by_role("row").filter(has_text=parent.info.run_name).first.wait_for(timeout=60_000)
    finally:
        shots.take(page, "mlflow-experiment-opened")


def check_prefect_recorded_and_resume(page, ui: str, campaign_id: str, shots: Shots) -> None:
    """Task runs whose verdict was reused read "... (recorded)"; the second run of the campaign is named as a resume
    and its artifact links the first run."""
    runs = _post(f"{ui}/api", "flow_runs")
    top = sorted((r for r in runs if r["parent_task_run_id"] is None), key=lambda r: r["expected_start_time"])
    assert [r["name"] for r in top] == [f"campaign {campaign_id}", f"campaign {campaign_id} · resume 1"]
    judged = [t for t in _post(f"{ui}/api", "task_runs") if t["name"].startswith("judge ")]
    recorded = [t for t in judged if t["state"]["name"].endswith(" (recorded)")]
    assert recorded, [t["state"]["name"] for t in judged]
    page.goto(f"{ui}/runs/flow-run/{recorded[0]['flow_run_id']}")
    page.get_by_text(recorded[0]["state"]["name"], exact=True).first.wait_for()
    shots.take(page, "prefect-recorded-task-state")
    page.goto(f"{ui}/runs")
    page.get_by_text(top[1]["name"], exact=True).first.wait_for()
    note = [a for a in _post(f"{ui}/api", "artifacts") if a["flow_run_id"] == top[1]["id"]
            and (a["key"] or "").endswith("-resume")]
    assert len(note) == 1 and f"/runs/flow-run/{top[0]['id']}" in note[0]["data"]
    page.goto(f"{ui}/artifacts/artifact/{note[0]['id']}")
    link = page.get_by_role("link", name=top[0]["name"]).first
    link.wait_for()
    shots.take(page, "prefect-resume-artifact")
    href = link.get_attribute("href") or ""
    assert href.endswith(f"/runs/flow-run/{top[0]['id']}"), href
    page.goto(href if href.startswith("http") else f"{ui}{href}")
    page.get_by_text(top[0]["name"], exact=True).first.wait_for()
    shots.take(page, "prefect-resumed-run")


_CLIPPED = """cells => cells.filter(c => {
    const r = c.getBoundingClientRect();
    let e = c.parentElement;
    while (e && e !== document.body) {
        const o = getComputedStyle(e).overflowX;
        if (o !== 'visible' && r.right > e.getBoundingClientRect().right + 1) return true;
        e = e.parentElement;
    }
    return r.right > window.innerWidth + 1;
}).map(c => c.innerText)"""
"""Cells whose right edge lies beyond a clipping (scrolling) ancestor or the window."""


def check_headline_fits(page, ui: str, campaign_id: str, shots: Shots, width: int) -> None:
    """Every cell of the headline's Markdown and table artifacts is visible in a `width`-pixel window (no column hidden
    behind a horizontal scroll), and all nine measures after model and arch are there."""
    page.set_viewport_size({"width": width, "height": 1000})
    first = min((r for r in _post(f"{ui}/api", "flow_runs") if r["parent_task_run_id"] is None),
                key=lambda r: r["expected_start_time"])
    for suffix in ("-headline", "-headline-table"):
        (art,) = [a for a in _post(f"{ui}/api", "artifacts")
                  if a["flow_run_id"] == first["id"] and (a["key"] or "") == f"{campaign_id}{suffix}"]
        page.goto(f"{ui}/artifacts/artifact/{art['id']}")
        page.get_by_role("table").first.wait_for()
        table = page.locator("table").first
        shots.take(page, f"prefect{suffix}-{width}px")
        text = table.inner_text()
        for measure in ("GPU-judged", "correct turns", "trajectories solved", "best speedup"):
            assert measure in text, f"{suffix}: {measure!r} not in the table"
        clipped = table.locator("th, td").evaluate_all(_CLIPPED)
        assert not clipped, f"{suffix}: cells beyond the visible {width} px: {clipped}"


def check_mlflow_link(page, ui: str, tracking_uri: str, campaign_id: str, shots: Shots) -> None:
    """The link `campaign run` prints (`#/experiments/<id>?workflowType=machine_learning`) opens the runs table in a
    browser that never chose a view (MLflow's default is GenAI)."""
    from flows.tracking import experiment_ui_path

    exp, parent, _ = _experiment(tracking_uri, campaign_id)
    page.goto(f"{ui}/{experiment_ui_path(exp.experiment_id)}")
    try:
        page.get_by_role("row").filter(has_text=parent.info.run_name).first.wait_for(timeout=60_000)
    finally:
        shots.take(page, "mlflow-printed-link")


def check_mlflow_recorded(page, ui: str, tracking_uri: str, campaign_id: str, shots: Shots) -> None:
    """A trajectory run with reused verdicts shows its ptxbench.recorded tag; run names are not cut in the table."""
    exp, parent, children = _experiment(tracking_uri, campaign_id)
    tagged = [c for c in children if "ptxbench.recorded" in c.data.tags]
    assert tagged, [c.data.tags for c in children]
    page.goto(f"{ui}/#/experiments/{exp.experiment_id}/runs/{tagged[0].info.run_id}")
    page.get_by_text(tagged[0].data.tags["ptxbench.recorded"]).first.wait_for()
    shots.take(page, "mlflow-recorded-tag")
    page.goto(f"{ui}/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning")
    row = page.get_by_role("row").filter(has_text=parent.info.run_name)
    row.first.wait_for()
    if not page.get_by_text(children[0].info.run_name, exact=True).count():
        row.first.locator("button[data-component-id*='runnamecellrenderer']").first.click()
    shown = []
    for c in children:
        cell = page.get_by_text(c.info.run_name, exact=True).first
        cell.wait_for()
        shown.append(cell.evaluate("e => e.scrollWidth <= e.clientWidth + 1 ? e.innerText : e.innerText.slice(0, "
                                   "Math.floor(e.innerText.length * e.clientWidth / e.scrollWidth))"))
    shots.take(page, "mlflow-run-names")
    assert len({s[:12] for s in shown}) == len(children), shown
