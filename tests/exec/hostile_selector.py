"""Hostile external selectors for the hardening tests; the behaviour is chosen by the first argument.

Modes:
  worker_stray WORD     worker that, when the query text contains WORD, prints an id-less answer
                        line before the real one (a stray line that used to desync the worker)
  worker_id KIND        worker that answers every request with an ``id`` of KIND: ``same`` (the
                        request's integer), ``str`` (its decimal string), ``padded`` ("0" + it),
                        ``true`` (JSON true), ``float`` (it as a float), ``none`` (no id)
  setsid PIDFILE        spawn-per-call: fork a grandchild that calls os.setsid(), writes its pid to
                        PIDFILE and sleeps 60 s; the selector itself sleeps 60 s
  worker_setsid PIDFILE worker that forks such a grandchild when started, then answers; it sleeps
                        60 s when the query text contains "hang"
  reason CHARS          spawn-per-call: answer the first id with a reason of CHARS characters
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def answer(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def first_k(request: dict[str, Any]) -> list[str]:
    ids = [c["id"] for c in request.get("candidates") or []]
    k = (request.get("query") or {}).get("k") or len(ids)
    return ids[:k]


def setsid_grandchild(pidfile: str) -> None:
    """Fork a grandchild that leaves the process group (new session) and sleeps."""
    if os.fork() == 0:
        os.setsid()
        tmp = pidfile + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(str(os.getpid()))
        os.replace(tmp, pidfile)
        # close the inherited pipes so only the process (not the pipes) outlives its parent
        for fd in (0, 1, 2):
            os.close(fd)
        time.sleep(60)
        os._exit(0)
    deadline = time.monotonic() + 5
    while not os.path.exists(pidfile) and time.monotonic() < deadline:
        time.sleep(0.01)


def response_id(kind: str, rid: Any) -> dict[str, Any]:
    if kind == "same":
        return {"id": rid}
    if kind == "str":
        return {"id": str(rid)}
    if kind == "padded":
        return {"id": f"0{rid}"}
    if kind == "true":
        return {"id": True}
    if kind == "float":
        return {"id": float(rid)}
    return {}


def worker(mode: str, arg: str) -> None:
    if mode == "worker_setsid":
        setsid_grandchild(arg)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        text = request["query"]["text"]
        rid = request.get("id")
        if mode == "worker_stray" and arg in text:
            answer({"selected": first_k(request)[-1:], "reason": "stray"})
        if mode == "worker_setsid" and "hang" in text:
            time.sleep(60)
        head = response_id(arg, rid) if mode == "worker_id" else {"id": rid}
        answer({**head, "selected": first_k(request), "reason": "real"})


def main() -> None:
    mode, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    if mode.startswith("worker"):
        worker(mode, arg)
        return
    raw = sys.stdin.read()
    request = json.loads(raw) if raw.strip() else {}
    if mode == "setsid":
        setsid_grandchild(arg)
        time.sleep(60)
    elif mode == "reason":
        answer({"selected": first_k(request)[:1], "reason": "r" * int(arg)})
    else:
        sys.stderr.write(f"unknown mode {mode}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
