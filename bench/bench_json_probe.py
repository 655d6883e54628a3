"""JSON encodes and decodes per row: the plugin on the plain-chat example, counted.

Runs pytest with the plugin over ``example_rollouts/plain-chat`` (as ``scripts/demo.sh``
runs its example: the workspace's own ini, its deterministic policy, in-process) in a child
process whose ``json`` and pydantic JSON entry points count their calls, attributed to the
module that called them (``json.JSONEncoder.encode``/``JSONDecoder.decode``, which
``json.dumps``/``json.loads`` call, ``json.dump``, and pydantic's JSON methods). Each call is
one encode (or decode) however much it holds: a
journal line, a trajectory file, a whole ``report.json``. The dataset is repeated to
``--rows`` rows so a run's fixed files (``run.json``, ``report.json``) weigh little; the
figure per row is the total over the rows.

    .venv/bin/python bench/bench_json_probe.py [--rows 200] [--html] [--baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example_rollouts" / "plain-chat"

CHILD = r"""
import collections, json, os, sys

counts = collections.Counter()
here = os.path.abspath(__file__) if "__file__" in globals() else ""


def _caller():
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if name not in ("json", "json.encoder", "json.decoder", "pydantic.main",
                        "pydantic.type_adapter", "__main__", "_pydantic_core"):
            short = name.split(".")[0] + "." + name.split(".")[-1] if "." in name else name
            return short + ":" + frame.f_code.co_name
        frame = frame.f_back
    return "?"


def counted(kind, fn):
    def wrapper(*args, **kwargs):
        counts[(kind, _caller())] += 1
        return fn(*args, **kwargs)
    wrapper.__wrapped__ = fn
    return wrapper


# json.dumps and json.loads go through these two (so does an encoder made once and reused);
# json.dump streams through iterencode instead.
json.JSONEncoder.encode = counted("encode", json.JSONEncoder.encode)
json.JSONDecoder.decode = counted("decode", json.JSONDecoder.decode)
json.dump = counted("encode", json.dump)
import pydantic, pydantic_core
pydantic.BaseModel.model_dump_json = counted("encode", pydantic.BaseModel.model_dump_json)
pydantic.BaseModel.model_validate_json = classmethod(
    counted("decode", pydantic.BaseModel.model_validate_json.__func__))
pydantic.TypeAdapter.dump_json = counted("encode", pydantic.TypeAdapter.dump_json)
pydantic.TypeAdapter.validate_json = counted("decode", pydantic.TypeAdapter.validate_json)
pydantic_core.to_json = counted("encode", pydantic_core.to_json)
pydantic_core.from_json = counted("decode", pydantic_core.from_json)

import pytest
rc = pytest.main(sys.argv[1:])
with open(os.environ["PROBE_OUT"], "w") as fh:
    fh.write(json.JSONEncoder.encode.__wrapped__(json.JSONEncoder(), [[k, w, n] for (k, w), n in counts.items()] + [["rc", "", int(rc)]]))
"""


def probe(rows: int, *, html: bool, baseline: bool) -> tuple[list[list[object]], int]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "plain-chat"
        shutil.copytree(EXAMPLE, work)
        lines = (work / "data" / "test.jsonl").read_text().splitlines()
        many = []
        for i in range(rows):
            row = json.loads(lines[i % len(lines)])
            row["id"] = f"r{i}"
            many.append(json.dumps(row))
        (work / "data" / "test.jsonl").write_text("\n".join(many) + "\n")
        child = Path(tmp) / "probe_child.py"
        child.write_text(CHILD)
        argv = [sys.executable, str(child), "-q", "-p", "no:cacheprovider", "-p", "no:asyncio",
                "--osmosis-output=out/run"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO), "PROBE_OUT": str(Path(tmp) / "out.json")}
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        if baseline:
            # A first run (not counted) whose report the counted run compares against.
            first = [*argv, "--osmosis-output=out/base"]
            subprocess.run(first, cwd=work, env=env, capture_output=True, timeout=600)
            argv.append("--osmosis-baseline=out/base/report.json")
        if html:
            argv.append("--osmosis-html=out/report.html")
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        out = Path(tmp) / "out.json"
        if not out.exists():
            raise SystemExit(
                f"probe child failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        data = json.loads(out.read_text())
        rc = next(int(n) for k, _, n in data if k == "rc")
        return [d for d in data if d[0] != "rc"], rc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--html", action="store_true", help="with --osmosis-html")
    parser.add_argument("--baseline", action="store_true", help="with --osmosis-baseline")
    args = parser.parse_args()
    counts, rc = probe(args.rows, html=args.html, baseline=args.baseline)
    flags = " ".join(
        f for f, on in (("--osmosis-html", args.html), ("--osmosis-baseline", args.baseline)) if on
    )
    print(f"plain-chat, {args.rows} rows, in-process {flags} (pytest exit {rc})")
    print(f"{'where':<56} {'encodes/row':>12} {'decodes/row':>12}")
    where: dict[str, list[int]] = {}
    for kind, module, n in counts:
        where.setdefault(str(module), [0, 0])[0 if kind == "encode" else 1] += int(n)
    for module, (enc, dec) in sorted(where.items(), key=lambda kv: -sum(kv[1])):
        print(f"{module:<56} {enc / args.rows:>12.2f} {dec / args.rows:>12.2f}")
    enc = sum(v[0] for v in where.values())
    dec = sum(v[1] for v in where.values())
    print(f"{'total':<56} {enc / args.rows:>12.2f} {dec / args.rows:>12.2f}")


if __name__ == "__main__":
    main()
