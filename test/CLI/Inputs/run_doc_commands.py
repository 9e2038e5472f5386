"""Runs the kiln command lines the README and docs/ give, so none of them
stops working unnoticed.

usage: run_doc_commands.py REPO WORKDIR
Takes every `kiln ...` line of a ```sh block in README.md and docs/*.md
(continued over trailing backslashes, a trailing # comment dropped) and every
`kiln ...` code span of the README's task table, less the ones that name
placeholders (<...>, [...], run.json, DIR, path/to), name a subcommand
alone, need MPI or a tool other than kiln, or train on a corpus (minutes: the
fixture's training runs). Each runs in WORKDIR, which links configs/ and test/ of
REPO, with `kiln` from PATH, and must exit 0. Prints each command and 'N
commands ran'; exits 1 at the first that fails.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

from doc_blocks import fenced_blocks

repo, work = sys.argv[1:3]
PLACEHOLDERS = re.compile(r"<|\[|run\.json|\bDIR\b|path/to|\.\.\.")
KILN = re.compile(r"^(?:build/tools/kiln/)?kiln (?!--help)")


def sh_lines(path):
    """The command lines of the ```sh blocks, continuations joined."""
    for info, lines in fenced_blocks(path):
        if info != "sh":
            continue
        pending = ""
        for line in lines:
            text = pending + " " + line.strip() if pending else line.strip()
            if text.endswith("\\"):
                pending = text[:-1].strip()
                continue
            pending = ""
            yield re.sub(r"\s+#.*$", "", text)


commands = []
for path in [os.path.join(repo, "README.md")] + sorted(glob.glob(os.path.join(repo, "docs/*.md"))):
    commands += [c for c in sh_lines(path) if KILN.match(c)]
for row in open(os.path.join(repo, "README.md"), encoding="utf-8"):
    if row.startswith("| "):
        commands += [c for c in re.findall(r"`([^`]+)`", row) if KILN.match(c)]
commands = [c for c in dict.fromkeys(KILN.sub("kiln ", c) for c in commands)  # each once
            if not PLACEHOLDERS.search(c) and len(c.split()) > 2
            and not (" train " in f" {c} " and "fixture" not in c)]

for name in ("configs", "test"):
    if not os.path.exists(os.path.join(work, name)):
        os.symlink(os.path.join(os.path.abspath(repo), name), os.path.join(work, name))
for command in commands:
    argv = ["kiln"] + shlex.split(KILN.sub("", command))
    run = subprocess.run(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    if run.returncode != 0:
        sys.exit(f"{command}: exit {run.returncode}: {run.stderr.strip()[-500:]}")
    print(command)
print(f"{len(commands)} commands ran")
