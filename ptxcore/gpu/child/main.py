"""Entry point of the candidate's process.

    python -m ptxcore.gpu.child session  --cmd-fd R --reply-fd W [--device N] [--session-mode ffi|triton|baseline]
    python -m ptxcore.gpu.child sanitize --library kernel.so --problem NAME --workload UUID --seed S
    python -m ptxcore.gpu.child profile  --library kernel.so --problem NAME --workload UUID --seed S
    python -m ptxcore.gpu.child sanitize|profile --triton-source kernel.py --triton-cache DIR --problem NAME ...
    python -m ptxcore.gpu.child sanitize|profile --request request.json   (started before its candidate: it
        imports, then waits for the judge's request file: library, problem, workload, seed, device, calls; a
        preparation file written first has it make its CUDA context and inputs before the request)

`session` (correctness and timing, child.session); `sanitize` (under compute-sanitizer memcheck) and
`profile` (under ncu) generate their own inputs from a seed with torch (child.standalone).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ptxcore.gpu.messages import SessionMode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ptxbench-child")
    p.add_argument("mode", choices=["session", "sanitize", "profile"])
    p.add_argument("--cmd-fd", type=int)
    p.add_argument("--reply-fd", type=int)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--session-mode", choices=[m.value for m in SessionMode], default=SessionMode.FFI.value)
    p.add_argument("--library")
    p.add_argument("--triton-source")
    p.add_argument("--triton-cache")
    p.add_argument("--problem")
    p.add_argument("--workload")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--calls", type=int, default=1)
    p.add_argument("--request")
    args = p.parse_args(argv)
    given = [x for x in (args.library, args.triton_source, args.request) if x is not None]
    if args.mode != "session" and len(given) != 1:
        p.error("sanitize/profile take exactly one of --library, --triton-source or --request")
    if args.triton_source is not None and args.triton_cache is None:
        p.error("--triton-source needs --triton-cache (the session's Triton cache)")
    if args.mode == "session":
        from ptxcore.gpu.child.session import run_session

        return run_session(args.cmd_fd, args.reply_fd, args.device, SessionMode(args.session_mode))
    from ptxcore.gpu.child.standalone import (
        PreparedRun,
        RequestError,
        await_request,
        import_for_run,
        prepare_run,
        requested,
        run_standalone,
    )

    prepared: list[PreparedRun] = []
    if args.request is not None:
        import_for_run()
        try:
            data = await_request(Path(args.request), on_prepare=lambda fields: prepared.append(prepare_run(fields)))
            args = requested(args, data)
        except RequestError as exc:
            print(f"ptxbench child: {exc}", file=sys.stderr, flush=True)
            return 2
    return run_standalone(args, profile=args.mode == "profile", prepared=prepared[0] if prepared else None)


if __name__ == "__main__":
    sys.exit(main())
