"""The code blocks of the README and of the user guide run as written, with the data they need (CI
runs this file).

The documents are ``README.md``, then the pages of ``docs/guide/`` in the reading order of the
guide's index (its ``toctree``). Their blocks run in that order, each once, from the root of a fresh
``git clone`` of the repository (the committed HEAD; files a block writes land there, never in the
working tree), with ``CLTR_DATA`` set to the shared data folder, as a reader following the documents
would: a block may use the files an earlier one wrote (a guide page those of the pages before it),
never its variables. The blocks' code and the library are the working tree's (``PYTHONPATH``); a
block that reads a committed file of the repository reads HEAD's.

* A ``python`` block is written to a file outside the clone and run as a script (``python
  block.py``), so a snippet that needs a ``__main__`` guard (Dask's worker processes import it) is
  run the way it must be.
* A ``text`` block right after a code block is that block's printed output, compared line by line:
  the figures the documents quote are the ones the code prints.
* A ``bash`` block runs under ``bash -e``; ``cltr`` is the installed command, or
  ``python -m counterfactual_ltr`` where it is not installed.
* An HTML comment before a block, ``<!-- readme-test: skip (reason) -->``, skips it with that
  reason; ``<!-- readme-test: slow -->`` marks its test ``slow``. A block skipped because another
  document runs it must be that document's block verbatim (checked here), so no block runs twice.
* Every block's test is ``slow`` in any case: each starts a Python process that imports the library
  and runs the example on MQ2008 or a log (5 s to minutes of CPU), and a block runs after every
  earlier one. The quick run (``-m "not slow"``) keeps only the checks of the documents' form:
  one title per page, every guide page in the index, data read only through ``CLTR_DATA``.
* The tests share one folder and run each block once, so under pytest-xdist they run in one
  process, in order (``ONE_WORKER_MODULES`` in ``conftest.py``).

Without MQ2008 (or without ``git`` or a repository to clone) the tests skip, saying why; a block
that reads ``real-logs/`` skips when that folder is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, mq2008_available, mq2008_dir

_FENCE = re.compile(r"(?:<!-- readme-test: (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w+)\n(?P<code>.*?)```\n", re.S)
_ANY_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)
_TOCTREE = re.compile(r"```\{toctree\}\n(?P<body>.*?)```", re.S)
GUIDE = REPO / "docs" / "guide"


@dataclass
class Block:
    doc: str                      # the document's path from the repository root
    lang: str
    code: str
    line: int
    marker: str
    end: int                      # where the block's closing fence ends in the document
    output: str | None = None     # the text block that follows, if any

    @property
    def skipped(self) -> bool:
        return self.marker.startswith("skip")

    @property
    def where(self) -> str:
        return f"{self.doc} line {self.line}"


def doc_blocks(text: str, doc: str = "README.md") -> list[Block]:
    """Code blocks in order, each with its marker and the ``text`` block printed after it (prose between)."""
    blocks = []
    for match in _FENCE.finditer(text):
        if match["lang"] == "text" and blocks and blocks[-1].output is None \
                and "```" not in text[blocks[-1].end:match.start()]:
            blocks[-1].output = match["code"]
            continue
        blocks.append(Block(doc, match["lang"], match["code"], text.count("\n", 0, match.start("code")),
                            (match["marker"] or "").strip(), match.end()))
    return blocks


def guide_pages() -> list[Path]:
    """The guide's pages in reading order: its index, then the index's toctree entries."""
    index = GUIDE / "index.md"
    if not index.is_file():
        return []
    match = _TOCTREE.search(index.read_text())
    names = [line.strip() for line in match["body"].splitlines()
             if line.strip() and not line.strip().startswith(":")] if match else []
    return [index] + [GUIDE / f"{name}.md" for name in names]


DOCUMENTS = [REPO / "README.md", *guide_pages()]
BLOCKS = [block for path in DOCUMENTS
          for block in doc_blocks(path.read_text(), path.relative_to(REPO).as_posix())]
RUNNABLE = [(k, b) for k, b in enumerate(BLOCKS) if b.lang in ("python", "bash")]


def test_the_documents_have_the_blocks_this_file_runs():
    langs = [b.lang for b in BLOCKS]
    assert langs.count("python") >= 3 and langs.count("bash") >= 3
    assert all(b.marker == "" or b.marker == "slow" or b.marker.startswith("skip (") for b in BLOCKS)
    assert sum(b.output is not None for b in BLOCKS) >= 3      # the quoted outputs are checked
    readme = [b for b in BLOCKS if b.doc == "README.md"]
    assert any(b.lang == "python" and not b.skipped and b.output is not None for b in readme), \
        "the README keeps one example that runs, its output quoted"


def test_every_guide_page_is_in_the_index_in_reading_order():
    pages = guide_pages()
    assert pages, "docs/guide/index.md with a toctree is missing"
    assert all(page.is_file() for page in pages), [p.name for p in pages if not p.is_file()]
    assert sorted(pages) == sorted(GUIDE.glob("*.md")), "a page of docs/guide/ is not in the index's toctree"


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_one_title_then_sections(path):
    """myst's rule: one ``#`` title, then ``##``, ``###``, ... without skipping a level."""
    prose = _ANY_FENCE.sub("", path.read_text())
    levels = [len(m[1]) for m in re.finditer(r"^(#{1,6}) \S", prose, re.M)]
    assert levels and levels[0] == 1 and levels.count(1) == 1, f"{path.name}: one '#' title first, got {levels}"
    jumps = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
    assert not jumps, f"{path.name}: heading levels skip from {jumps}"


_DATA_FILE = re.compile(r"(?:\.\./)*(?:shared/data/)?(?:MQ2008|real-logs)/")
_THROUGH_CLTR_DATA = ('"$CLTR_DATA/', "$CLTR_DATA/", "${CLTR_DATA}/", 'data_path("', "data_path('")


def test_blocks_read_the_data_through_cltr_data():
    """No block depends on the folder it runs in: data paths go through ``CLTR_DATA``."""
    bad = []
    for _, block in RUNNABLE:
        code = re.sub(r"(?m)(^|\s)#.*$", "", block.code)        # comments may name the folders
        if "../shared" in code:
            bad.append(f"{block.where}: ../shared")
        for match in _DATA_FILE.finditer(code):
            before = code[max(0, match.start() - 12):match.start()]
            if not before.endswith(_THROUGH_CLTR_DATA):
                bad.append(f"{block.where}: {code[match.start():match.end() + 20]!r}")
    assert not bad, "read data as \"$CLTR_DATA/...\" or click_sim.data_path(...):\n" + "\n".join(bad)


def test_no_block_runs_twice():
    """A block skipped because another document runs it is that block, verbatim; run blocks differ."""
    run = [b.code for _, b in RUNNABLE if not b.skipped]
    assert len(run) == len(set(run)), "a block runs twice"
    for block in BLOCKS:
        named = re.findall(r"(README\.md|docs/guide/[\w-]+\.md)", block.marker) if block.skipped else []
        for doc in named:
            others = [b for b in BLOCKS if b.doc == doc and not b.skipped]
            assert any(b.code == block.code for b in others), \
                f"{block.where} is skipped as run by {doc}, which has no such block"


class _Runner:
    """Runs the documents' blocks in order from the root of a fresh clone, each once."""

    def __init__(self, folder: Path):
        self.root = folder / "clone"
        self.scripts = folder / "blocks"
        self.scripts.mkdir()
        self.data = mq2008_dir().parent
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(self.root)], check=True, capture_output=True,
                       text=True, timeout=300)
        self.done: dict[int, subprocess.CompletedProcess] = {}

    def env(self):
        paths = [str(REPO), os.environ.get("PYTHONPATH", "")]
        return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), PYTHON=sys.executable,
                    PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
                    CLTR_DATA=str(self.data), MPLBACKEND="Agg")

    def lacks_data(self, block: Block) -> str | None:
        """Why ``block`` cannot run here (it reads ``real-logs/`` and that folder is absent), else None."""
        if "real-logs/" in block.code and not (self.data / "real-logs").is_dir():
            return f"{block.where} reads real-logs/, not found in {self.data}"
        return None

    def run(self, k: int) -> subprocess.CompletedProcess:
        if k not in self.done:
            block = BLOCKS[k]
            if block.lang == "python":
                path = self.scripts / f"block_{k}.py"
                path.write_text(block.code)
                command = [sys.executable, str(path)]
            else:
                path = self.scripts / f"block_{k}.sh"
                path.write_text('command -v cltr >/dev/null || cltr() { "$PYTHON" -m counterfactual_ltr "$@"; }\n'
                                + block.code)
                command = ["bash", "-e", str(path)]
            self.done[k] = subprocess.run(command, cwd=self.root, env=self.env(), capture_output=True, text=True,
                                          timeout=1200)
        return self.done[k]


def _cannot_clone() -> str | None:
    if shutil.which("git") is None:
        return "git is not installed"
    probe = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if probe.returncode != 0 or Path(probe.stdout.strip()).resolve() != REPO.resolve():
        return f"{REPO} is not the root of a git repository"
    return None


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    if not mq2008_available():
        pytest.skip(f"the documents' blocks read MQ2008, not found at {mq2008_dir()} (set CLTR_DATA to the folder "
                    "that holds MQ2008/ and real-logs/)")
    reason = _cannot_clone()
    if reason:
        pytest.skip(f"the documents' blocks run from the root of a fresh clone: {reason}")
    return _Runner(tmp_path_factory.mktemp("docs"))


def _params():
    for k, block in RUNNABLE:
        marks = [pytest.mark.slow]             # a Python process per block, after every earlier block
        if block.skipped:
            marks.append(pytest.mark.skip(reason=f"{block.where}: {block.marker[5:].strip(' ()')}"))
        yield pytest.param(k, id=f"{block.doc}:line{block.line}-{block.lang}", marks=marks)


@pytest.mark.parametrize("k", list(_params()))
def test_block_runs_as_written(k, runner):
    block = BLOCKS[k]
    if runner.lacks_data(block):
        pytest.skip(runner.lacks_data(block))
    # Earlier blocks first (a block may read what they wrote), skipped ones excepted.
    for j, earlier_block in RUNNABLE:
        if j < k and not earlier_block.skipped and not runner.lacks_data(earlier_block):
            earlier = runner.run(j)
            assert earlier.returncode == 0, f"block at {earlier_block.where} failed:\n{earlier.stderr[-3000:]}"
    result = runner.run(k)
    assert result.returncode == 0, f"block at {block.where} failed:\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr
    if block.output is not None:
        printed = [line.rstrip() for line in result.stdout.splitlines() if line.strip()]
        quoted = [line.rstrip() for line in block.output.splitlines() if line.strip()]
        assert printed == quoted, f"{block.where} quotes {quoted}, the block printed {printed}"
