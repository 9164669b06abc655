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
    campaign = [r for r in runs if r["parent_task_run_id"] is None]
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
