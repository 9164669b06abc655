"""Entry point of the candidate's process.

    python -m ptxcore.gpu.child session  --cmd-fd R --reply-fd W [--device N] [--session-mode ffi|triton|baseline]
    python -m ptxcore.gpu.child sanitize --library kernel.so --problem NAME --workload UUID --seed S
    python -m ptxcore.gpu.child profile  --library kernel.so --problem NAME --workload UUID --seed S
    python -m ptxcore.gpu.child sanitize|profile --triton-source kernel.py --triton-cache DIR --problem NAME ...

`session` (correctness and timing, child.session); `sanitize` (under compute-sanitizer memcheck) and
`profile` (under ncu) generate their own inputs from a seed with torch (child.standalone).
"""

from __future__ import annotations

import argparse
import sys

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
    args = p.parse_args(argv)
    if args.mode != "session" and (args.library is None) == (args.triton_source is None):
        p.error("sanitize/profile take exactly one of --library or --triton-source")
    if args.triton_source is not None and args.triton_cache is None:
        p.error("--triton-source needs --triton-cache (the session's Triton cache)")
    if args.mode == "session":
        from ptxcore.gpu.child.session import run_session

        return run_session(args.cmd_fd, args.reply_fd, args.device, SessionMode(args.session_mode))
    from ptxcore.gpu.child.standalone import run_standalone

    return run_standalone(args, profile=args.mode == "profile")


if __name__ == "__main__":
    sys.exit(main())
