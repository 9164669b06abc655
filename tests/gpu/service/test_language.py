"""A Triton request carries its language through the service: request model, durable store (an older store gains
the column), the task view, the worker's WorkItem and the runner's call into the judge."""

from __future__ import annotations

import sqlite3

import pytest
from pydantic import ValidationError

from ptxcore.gpu.service.models import SubmitRequest, TaskKind, WorkItem
from ptxcore.gpu.service.store import TaskStore
from ptxcore.schema import Language, Solution

GEMM = "gemm_n7168_k5120"


def solution(path: str, language: str) -> dict:
    return {"name": "s", "definition": GEMM, "author": "me",
            "spec": {"language": language, "target_hardware": ["H200"], "entry_point": f"{path}::run"},
            "sources": [{"path": path, "content": "import triton\n"}]}


def test_requests_default_to_cuda_and_take_triton():
    assert SubmitRequest(definition=GEMM, source="x").language is Language.CUDA
    assert SubmitRequest(definition=GEMM, source="x", language="triton").language is Language.TRITON
    req = SubmitRequest(definition=GEMM, language="triton", solution=Solution.model_validate(solution("k.py", "triton")))
    assert req.source_text() == "import triton\n"


@pytest.mark.parametrize("language", ["python", "tilelang", "cpp", "rust", ""])
def test_a_language_nothing_judges_is_refused(language):
    with pytest.raises(ValidationError, match="language"):
        SubmitRequest(definition=GEMM, source="x", language=language)


@pytest.mark.parametrize("path,spec,language,match", [
    ("k.cu", "triton", "triton", "name.py"),        # a Triton solution's file is .py
    ("k.py", "cuda", "cuda", "name.cu"),            # a CUDA solution's file is .cu
    ("k.py", "cuda", "triton", "differs"),          # the spec and the request disagree
    ("../k.py", "triton", "triton", "plain"),       # never a path
])
def test_a_solution_must_agree_with_the_language(path, spec, language, match):
    with pytest.raises(ValidationError, match=match):
        SubmitRequest(definition=GEMM, language=language, solution=Solution.model_validate(solution(path, spec)))


def test_the_store_keeps_the_language(tmp_path):
    store = TaskStore(tmp_path / "t.sqlite3")
    view = store.create(kind=TaskKind.EVALUATE, definition=GEMM, workload_uuid="w", arch="hopper",
                        source_sha256="a" * 64, client_tag="", timeout_s=5, language=Language.TRITON)
    cuda = store.create(kind=TaskKind.EVALUATE, definition=GEMM, workload_uuid="w", arch="hopper",
                        source_sha256="b" * 64, client_tag="", timeout_s=5)
    store.close()
    again = TaskStore(tmp_path / "t.sqlite3")
    assert again.get(view.task_id).language is Language.TRITON and again.get(cuda.task_id).language is Language.CUDA
    _, pending = again.recover()
    assert [v.language for v in pending] == [Language.TRITON, Language.CUDA]


def test_a_store_written_before_the_language_column_opens_with_cuda(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE tasks (seq INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,
          state TEXT NOT NULL, definition TEXT NOT NULL, workload_uuid TEXT NOT NULL, arch TEXT NOT NULL,
          source_sha256 TEXT NOT NULL, client_tag TEXT NOT NULL, timeout_s REAL NOT NULL, gpu INTEGER,
          attempts_json TEXT NOT NULL DEFAULT '[]', created_at REAL NOT NULL, started_at REAL, finished_at REAL,
          queue_s REAL, service_s REAL, result_json TEXT, error TEXT NOT NULL DEFAULT '');
        INSERT INTO tasks (task_id, kind, state, definition, workload_uuid, arch, source_sha256, client_tag,
          timeout_s, created_at) VALUES ('""" + "c" * 32 + """', 'evaluate', 'pending', 'gemm_n7168_k5120', '',
          'hopper', '""" + "d" * 64 + """', '', 5, 1.0);
    """)
    db.commit()
    db.close()
    store = TaskStore(path)
    assert store.get("c" * 32).language is Language.CUDA
    new = store.create(kind=TaskKind.SANITIZE, definition=GEMM, workload_uuid="", arch="hopper",
                       source_sha256="e" * 64, client_tag="", timeout_s=5, language=Language.TRITON)
    assert store.get(new.task_id).language is Language.TRITON


def test_the_runner_judges_a_work_item_in_its_language(tmp_path, monkeypatch):
    from ptxcore.gpu.service.judge_runner import JudgeRunner

    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(tmp_path / "cache"))
    runner = JudgeRunner(gpu=0, work_dir=tmp_path)
    seen = []
    monkeypatch.setattr(runner.judge, "monitor_physical_gpu", lambda index: None)
    for kind, stage in ((TaskKind.EVALUATE, "judge"), (TaskKind.SANITIZE, "sanitize_only"),
                        (TaskKind.PROFILE, "profile_only")):
        monkeypatch.setattr(runner.judge, stage, lambda *a, _k=kind, **kw: seen.append((_k, kw["language"])))
    item = WorkItem(task_id="a" * 32, kind=TaskKind.EVALUATE, definition=GEMM, arch="hopper", source="import triton",
                    source_sha256="0" * 64, timeout_s=60, language=Language.TRITON)
    for kind in TaskKind:
        runner.run(item.model_copy(update={"kind": kind}), lambda phase: None)
    assert seen == [(k, Language.TRITON) for k in TaskKind]
    assert WorkItem.model_validate(item.model_dump(mode="json")).language is Language.TRITON  # the worker pipe


def test_a_triton_submission_is_queued_with_its_language(start_service):
    svc = start_service(gpus=(0,))
    task = svc.submit("import triton\n", language="triton")
    assert svc.http.get(f"/tasks/{task}").json()["language"] == "triton"
    cuda = svc.submit("__global__ void k() {}\n")
    assert svc.http.get(f"/tasks/{cuda}").json()["language"] == "cuda"
    r = svc.http.post("/evaluate", json={"definition": GEMM, "source": "x = 1", "language": "python"})
    assert r.status_code == 422 and "language" in r.text
