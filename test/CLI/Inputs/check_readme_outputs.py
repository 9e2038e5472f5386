"""Runs every command a README block quotes with its output and checks the
quoted lines against what the command prints now.

usage: check_readme_outputs.py README.md REPO
A block is a fenced block whose first line is `$ build/tools/kiln/kiln ...`;
the command runs in REPO with `kiln` from PATH. Each later line of the block
must be a line of the output, in order: verbatim, or, ending in " ...", its
start; a line "..." stands for lines left out. Prints one line per command
and 'N commands, M lines checked'; exits 1 naming the first line not found.
"""
import shlex
import subprocess
import sys

from doc_blocks import fenced_blocks

readme, repo = sys.argv[1:3]
blocks = [lines for _, lines in fenced_blocks(readme)
          if lines and lines[0].startswith("$ build/tools/kiln/kiln ")]

checked = 0
for block in blocks:
    command = ["kiln"] + shlex.split(block[0][len("$ build/tools/kiln/kiln "):])
    run = subprocess.run(command, cwd=repo, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{block[0]}: exit {run.returncode}: {run.stderr.strip()}")
    output, at = run.stdout.splitlines(), 0
    for quoted in block[1:]:
        if quoted == "...":
            continue
        prefix = quoted[:-4] if quoted.endswith(" ...") else None
        while at < len(output) and not (
                output[at] == quoted or (prefix is not None and output[at].startswith(prefix))):
            at += 1
        if at == len(output):
            sys.exit(f"{block[0]}: README quotes a line the command no longer prints (or not "
                     f"in this order):\n  {quoted}")
        at += 1
        checked += 1
    print(f"{' '.join(command[:3])}: {len(block) - 1} lines")
print(f"{len(blocks)} commands, {checked} lines checked")
