"""The README's code blocks run as written, with the data they need (CI runs this file).

Blocks are read in order from ``README.md`` and run in one scratch folder that holds ``MQ2008``
(a link to the shared data), as a reader following the README would: a block may use the files an
earlier one wrote, never its variables.

* A ``python`` block is written to a file and run as a script (``python block.py``), so a snippet
  that needs a ``__main__`` guard (Dask's worker processes import it) is run the way it must be.
* A ``text`` block right after a code block is that block's printed output, compared line by line:
  the figures the README quotes are the ones the code prints.
* A ``bash`` block runs under ``bash -e``; ``cltr`` is the installed command, or
  ``python -m counterfactual_ltr`` where it is not installed.
* An HTML comment before a block, ``<!-- readme-test: skip (reason) -->``, skips it with that
  reason; ``<!-- readme-test: slow -->`` marks its test ``slow``.
* Every block's test is ``slow`` in any case: each starts a Python process that imports the library
  and runs the example on MQ2008 or a log (5 s to minutes of CPU), and a block runs after every
  earlier one. The quick run (``-m "not slow"``) keeps only the check of the README's blocks.
* The tests share one folder and run each block once, so under pytest-xdist they run in one
  process, in order (``ONE_WORKER_MODULES`` in ``conftest.py``).

Without MQ2008 the tests skip, saying where the data was looked for.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import REPO, mq2008_available, mq2008_dir

_FENCE = re.compile(r"(?:<!-- readme-test: (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w+)\n(?P<code>.*?)```\n", re.S)


@dataclass
class Block:
    lang: str
    code: str
    line: int
    marker: str
    end: int                      # where the block's closing fence ends in the README
    output: str | None = None     # the text block that follows, if any


def readme_blocks(text: str) -> list[Block]:
    """Code blocks in order, each with its marker and the ``text`` block printed after it (prose between)."""
    blocks = []
    for match in _FENCE.finditer(text):
        if match["lang"] == "text" and blocks and blocks[-1].output is None \
                and "```" not in text[blocks[-1].end:match.start()]:
            blocks[-1].output = match["code"]
            continue
        blocks.append(Block(match["lang"], match["code"], text.count("\n", 0, match.start("code")),
                            (match["marker"] or "").strip(), match.end()))
    return blocks


BLOCKS = readme_blocks((REPO / "README.md").read_text())
RUNNABLE = [(k, b) for k, b in enumerate(BLOCKS) if b.lang in ("python", "bash")]


def test_the_readme_has_the_blocks_this_file_runs():
    langs = [b.lang for b in BLOCKS]
    assert langs.count("python") >= 3 and langs.count("bash") >= 3
    assert all(b.marker == "" or b.marker == "slow" or b.marker.startswith("skip (") for b in BLOCKS)
    assert sum(b.output is not None for b in BLOCKS) >= 3      # the quoted outputs are checked


class _Runner:
    """Runs the README's blocks in order in one folder, each once."""

    def __init__(self, folder):
        self.folder = folder
        self.done: dict[int, subprocess.CompletedProcess] = {}
        os.symlink(mq2008_dir(), folder / "MQ2008")

    def env(self):
        paths = [str(REPO), os.environ.get("PYTHONPATH", "")]
        return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), PYTHON=sys.executable,
                    PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
                    CLTR_DATA=str(mq2008_dir().parent), MPLBACKEND="Agg")

    def run(self, k: int) -> subprocess.CompletedProcess:
        if k not in self.done:
            block = BLOCKS[k]
            if block.lang == "python":
                path = self.folder / f"block_{k}.py"
                path.write_text(block.code)
                command = [sys.executable, str(path)]
            else:
                path = self.folder / f"block_{k}.sh"
                path.write_text('command -v cltr >/dev/null || cltr() { "$PYTHON" -m counterfactual_ltr "$@"; }\n'
                                + block.code)
                command = ["bash", "-e", str(path)]
            self.done[k] = subprocess.run(command, cwd=self.folder, env=self.env(), capture_output=True, text=True,
                                          timeout=1200)
        return self.done[k]


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    if not mq2008_available():
        pytest.skip(f"the README's blocks read MQ2008, not found at {mq2008_dir()} (set CLTR_DATA to the folder "
                    "that contains MQ2008)")
    return _Runner(tmp_path_factory.mktemp("readme"))


def _params():
    for k, block in RUNNABLE:
        marks = [pytest.mark.slow]             # a Python process per block, after every earlier block
        if block.marker.startswith("skip"):
            marks.append(pytest.mark.skip(reason=f"README line {block.line}: {block.marker[5:].strip(' ()')}"))
        yield pytest.param(k, id=f"line{block.line}-{block.lang}", marks=marks)


@pytest.mark.parametrize("k", list(_params()))
def test_readme_block_runs_as_written(k, runner):
    # Earlier blocks first (a block may read what they wrote), skipped ones excepted.
    for j, block in RUNNABLE:
        if j < k and not block.marker.startswith("skip"):
            earlier = runner.run(j)
            assert earlier.returncode == 0, f"README block at line {block.line} failed:\n{earlier.stderr[-3000:]}"
    result = runner.run(k)
    block = BLOCKS[k]
    assert result.returncode == 0, f"README block at line {block.line} failed:\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr
    if block.output is not None:
        printed = [line.rstrip() for line in result.stdout.splitlines() if line.strip()]
        quoted = [line.rstrip() for line in block.output.splitlines() if line.strip()]
        assert printed == quoted, f"README line {block.line} quotes {quoted}, the block printed {printed}"
