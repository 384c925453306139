"""Run documented patterns as a user runs them: one fresh Python process each.

A *user-path script* is a program as a user writes it: module-level globals,
no warm-up step, the framework's defaults. It is either

* a code block of README.md, README_cn.md or docs/*.rst, found by the marker
  written just before it (``<!-- user-path: NAME -->`` in Markdown,
  ``.. user-path: NAME`` in reStructuredText, both invisible in the rendered
  page), completed where the block is a fragment by a ``prelude`` (what the
  page leaves to the reader: ``model``, ``loader``) and an ``epilogue``
  (what the test reads back), or
* a file of ``examples/`` run with its documented command line, or
* a script written out in a test for a pattern the docs describe in prose
  (e.g. "the code is the same" for the legacy static program).

Each runs with ``sys.executable`` in its own process and its own empty
working directory, with ``PYTHONPATH`` set to the repository (so the
package under test is this checkout's) and to this folder (for
``user_model`` and ``record``, the helper modules a script may import).
What the script saves with ``record.save`` comes back as a dict of arrays.

Example:
    >>> block = doc_block("readme-quickstart")
    >>> [source.split(":")[0] for source in block.sources], "AdamWDL(" in block.code
    (['README.md', 'README_cn.md'], True)
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from launching import one_job_at_a_time, rank_logs, starts_ranks

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIMEOUT_S = 300
# ``user-path: NAME``, ``user-path: NAME (not run: REASON)`` (REASON one of NOT_RUN_REASONS) or
# ``user-path: NAME (continues EARLIER)``: the block runs after the page's block EARLIER, in one process
_MARKER_BODY = r"user-path:\s*([\w-]+)(?:\s+\(not run: ([^)]+)\))?(?:\s+\(continues ([\w-]+)\))?"
MARKDOWN_MARKER = re.compile(r"<!--\s*" + _MARKER_BODY + r"\s*-->")
RST_MARKER = re.compile(r"^\.\. " + _MARKER_BODY + r"\s*$")
#: The block languages whose blocks are documented patterns: programs, configs, shell commands.
PYTHON, CONFIG_LANGUAGES, SHELL_LANGUAGES = ("python",), ("yaml", "json"), ("bash", "shell", "sh", "console")


def doc_sources() -> List[str]:
    """Every page whose Python blocks are documented patterns."""
    return ["README.md", "README_cn.md"] + sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.rst")
    )


@dataclasses.dataclass
class DocBlock:
    """One Python code block: its code, where it is, and its marker (None: unmarked)."""

    marker: Optional[str]
    code: str
    sources: List[str]  # "README.md" or "docs/x.rst:LINE" for every place it appears
    language: str = "python"
    not_run: Optional[str] = None  # the marker's reason why the tests do not run it
    continues: Optional[str] = None  # the marker of the earlier block of the page this one continues

    @property
    def program(self) -> str:
        """The code without comments or layout (README_cn's block is README's):
        Python's syntax tree, a config's data, a shell block's commands."""
        if self.language == "json":
            return json.dumps(self.config(), sort_keys=True)
        if self.language == "yaml":  # its lines without comments (PyYAML is the PaddleFormers venv's only)
            return "\n".join(re.sub(r"(^|\s+)#.*$", "", line).rstrip() for line in self.code.splitlines())
        if self.language in SHELL_LANGUAGES:
            return json.dumps(self.commands())
        return ast.dump(ast.parse(self.code))

    def config(self) -> dict:
        """A YAML or JSON block's mapping."""
        if self.language == "json":
            return json.loads(self.code)
        import yaml

        return yaml.safe_load(self.code)

    def commands(self) -> List[List[str]]:
        """A shell block's commands as words, comments dropped, ``\\`` continuations joined."""
        joined = re.sub(r"\\\n", " ", self.code)
        return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def _block(source: str, index: int, language: str, code: str, match: Optional[re.Match]) -> DocBlock:
    return DocBlock(match and match.group(1), code, [f"{source}:{index + 1}"], language,
                    match and match.group(2), match and match.group(3))


def _markdown_blocks(source: str, text: str, languages: Sequence[str]) -> List[DocBlock]:
    blocks = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        language = line.strip()[3:]
        if not line.strip().startswith("```") or language not in languages:
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        match = MARKDOWN_MARKER.fullmatch(previous.strip())
        blocks.append(_block(source, index, language, "\n".join(lines[index + 1:end]) + "\n", match))
    return blocks


def _rst_blocks(source: str, text: str, languages: Sequence[str]) -> List[DocBlock]:
    blocks = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        directive = re.fullmatch(r"\.\. code-block::\s*(\w+)", line.strip())
        if directive is None or directive.group(1) not in languages:
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for following in lines[index + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        match = RST_MARKER.match(previous.strip())
        blocks.append(_block(source, index, directive.group(1),
                             textwrap.dedent("\n".join(body)).strip("\n") + "\n", match))
    return blocks


def doc_blocks(languages: Sequence[str] = PYTHON) -> List[DocBlock]:
    """Every block in ``languages`` (Python by default) of every documented page, in page order."""
    blocks = []
    for source in doc_sources():
        text = (ROOT / source).read_text(encoding="utf-8")
        reader = _markdown_blocks if source.endswith(".md") else _rst_blocks
        blocks += reader(source, text, languages)
    return blocks


def doc_block(marker: str, languages: Sequence[str] = PYTHON) -> DocBlock:
    """The block carrying ``marker``; a marker on several pages (a translation)
    must mark the same program, comments aside."""
    found = [block for block in doc_blocks(languages) if block.marker == marker]
    if not found:
        raise LookupError(f"no {'/'.join(languages)} block is marked `user-path: {marker}` in {doc_sources()}")
    programs = {block.program for block in found}
    if len(programs) != 1:
        raise AssertionError(f"`user-path: {marker}` marks different programs at "
                             f"{[source for block in found for source in block.sources]}")
    first = found[0]
    return DocBlock(marker, first.code, [source for block in found for source in block.sources], first.language,
                    first.not_run, first.continues)


def doc_chain(marker: str, languages: Sequence[str] = PYTHON) -> List[DocBlock]:
    """The block carrying ``marker`` after the blocks it continues, in page order: what a reader runs,
    in one process, for it."""
    chain = [doc_block(marker, languages)]
    while chain[0].continues is not None:
        chain.insert(0, doc_block(chain[0].continues, languages))
    return chain


def indented_block(marker: str, spaces: int) -> str:
    """The block's code indented, for a block the page places inside a
    ``with`` (e.g. ``program_guard``)."""
    return textwrap.indent(doc_block(marker).code.rstrip("\n"), " " * spaces)


def shell_command(words: Sequence[str], substitutions: Optional[Dict[str, str]] = None) -> List[str]:
    """A documented command as the test runs it: ``python`` and ``.venv/bin/python`` are this
    interpreter, a path into the clone (``examples/``, ``benchmarks/``, ``scripts/``) is this
    checkout's, ``substitutions`` replace the user's own names (a model factory, a file), and
    ``make TARGET`` is ``make -n TARGET`` in the clone: the commands the target runs, printed, not run."""
    if list(words[:1]) == ["make"]:
        return ["make", "-n", "-C", str(ROOT), *words[1:]]
    substitutions = substitutions or {}
    command = []
    for word in words:
        if word in ("python", ".venv/bin/python"):
            word = sys.executable
        elif word.split("/")[0] in ("examples", "benchmarks", "scripts"):
            word = str(ROOT / word)
        command.append(substitutions.get(word, word))
    return command


def _installs_packages(command: List[str]) -> bool:
    """``pip install ...``, ``pip wheel ...`` or ``python -m pip install ...``."""
    words = command[2:] if command[:2] == ["-m", "pip"] else command
    words = words[2:] if len(words) > 2 and words[1:3] == ["-m", "pip"] else words
    if words and words[0] == "pip":
        words = words[1:]
    return bool(words) and words[0] in ("install", "wheel") and "pip" in " ".join(command)


def _runs_gpu_check(command: List[str]) -> bool:
    """``scripts/gpu_check.sh``, with ``NAME=value`` settings before it."""
    words = [word for word in command if not re.fullmatch(r"[A-Z_]+=\S*", word)]
    return words == ["scripts/gpu_check.sh"]


def _longer_than_a_test_run(block: "DocBlock") -> bool:
    """A Trainer config whose schedule's own stages are longer than a test run can shorten ``max_steps`` to."""
    stages = (block.config().get("lr_scheduler_kwargs") or {}).get("stages", [])
    return block.language in CONFIG_LANGUAGES and any(stage.get("num_steps", 0) >= 1000 for stage in stages)


#: Why a marked block is not run, each with the check that the block is what the reason says.
NOT_RUN_REASONS = {
    "installs from a package index, and the test machine is offline": lambda block: all(
        _installs_packages(command) for command in block.commands()),
    "needs a CUDA GPU": lambda block: all(
        _runs_gpu_check(command) or _installs_packages(command) for command in block.commands())
    and any(_runs_gpu_check(command) or "paddlepaddle-gpu" in " ".join(command) for command in block.commands()),
    "its stages are longer than a test run; the same stages run as Python in user-path: sequential-schedule":
        _longer_than_a_test_run,
}


@dataclasses.dataclass
class UserScript:
    """One pattern, one process. ``code`` is the whole program, or ``path``
    a file (an example) run with ``args``, or ``argv`` a documented shell
    command (see :func:`shell_command`); ``env`` is added to the
    environment (e.g. ``FLAGS_enable_pir_api``)."""

    name: str
    code: Optional[str] = dataclasses.field(default=None, repr=False)
    path: Optional[Path] = None
    args: Sequence[str] = ()
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    timeout_s: int = TIMEOUT_S
    argv: Optional[Sequence[str]] = None

    def command(self, work_dir: Path) -> List[str]:
        if self.argv is not None:
            return list(self.argv)
        if self.path is not None:
            return [sys.executable, str(self.path), *self.args]
        script = work_dir / f"{self.name}.py"
        script.write_text(self.code, encoding="utf-8")
        return [sys.executable, str(script), *self.args]


REGISTRY: Dict[str, UserScript] = {}


def register(*scripts: UserScript) -> None:
    """Make scripts known by name (test modules call this at import)."""
    for script in scripts:
        if script.name in REGISTRY:
            raise ValueError(f"two user-path scripts are named {script.name!r}")
        REGISTRY[script.name] = script


def from_doc(name: str, marker: str, prelude: str = "", epilogue: str = "", **options) -> UserScript:
    """A documented block, after the blocks it continues (:func:`doc_chain`), with what the page leaves
    to the reader before them and the test's read-back after it, at module level, as one script."""
    parts = [textwrap.dedent(prelude).strip("\n"), *(block.code.strip("\n") for block in doc_chain(marker)),
             textwrap.dedent(epilogue).strip("\n")]
    return UserScript(name, code="\n\n".join(part for part in parts if part) + "\n", **options)


@dataclasses.dataclass
class Result:
    script: UserScript
    returncode: int
    stdout: str = dataclasses.field(repr=False)
    stderr: str = dataclasses.field(repr=False)
    saved: Dict[str, np.ndarray] = dataclasses.field(repr=False)

    def check(self) -> "Result":
        """Fails (with the script's stderr, and its ranks' logs) unless the process exited with 0."""
        if self.returncode != 0:
            raise AssertionError(
                f"user path {self.script.name!r} exited with {self.returncode}:\n{self.stderr[-9000:]}"
            )
        return self

    def group(self, prefix: str) -> Dict[str, np.ndarray]:
        """The entries saved as ``record.save(prefix={name: value})``."""
        start = prefix + "/"
        return {key[len(start):]: value for key, value in self.saved.items() if key.startswith(start)}


def run(script: UserScript) -> Result:
    """Run ``script`` in a fresh interpreter, in a fresh working directory."""
    with tempfile.TemporaryDirectory(prefix=f"user-path-{script.name}-") as work:
        work_dir = Path(work)
        out = work_dir / "saved.npz"
        env = {key: value for key, value in os.environ.items() if key != "FLAGS_enable_pir_api"}
        env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]), USER_PATH_OUT=str(out))
        env.update(script.env)
        command = script.command(work_dir)
        try:
            with one_job_at_a_time() if starts_ranks(command) else contextlib.nullcontext():
                proc = subprocess.run(command, cwd=work_dir, env=env, capture_output=True, text=True,
                                      timeout=script.timeout_s)
        except subprocess.TimeoutExpired as exc:
            return Result(script, -1, exc.stdout or "", f"timed out after {script.timeout_s} s", {})
        stderr = proc.stderr + (rank_logs(work_dir / "log") if proc.returncode != 0 else "")
        saved: Dict[str, np.ndarray] = {}
        if out.exists():
            with np.load(out) as data:
                saved = dict(data)
        return Result(script, proc.returncode, proc.stdout, stderr, saved)


def lines_matching(stdout: str, pattern: str) -> List[Tuple[str, ...]]:
    """The groups of every stdout line matching ``pattern``."""
    return [match.groups() for match in re.finditer(pattern, stdout, flags=re.M)]
