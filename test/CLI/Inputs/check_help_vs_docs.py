"""Checks that `kiln --help` and docs/cli.md's usage blocks name the same
options for each command.

usage: kiln --help | check_help_vs_docs.py docs/cli.md
Prints one line per command and 'N commands agree'; exits 1 naming each
option one side lists and the other does not.
"""
import re
import sys

from doc_blocks import fenced_blocks

OPTION = re.compile(r"(?<![\w.-])(--[a-z][a-z-]*|-o)(?![\w.-]*\.)")


def options(text):
    return set(OPTION.findall(text))


def docs_usage(path):
    """command -> options, from the fenced usage blocks (```, not ```sh)."""
    by_command = {}
    for info, lines in fenced_blocks(path):
        if info:
            continue
        command = None
        for line in lines:
            m = re.match(r"kiln ([a-z-]+)", line)
            if m:
                command = m.group(1)
            if command:
                by_command.setdefault(command, set()).update(options(line))
    return by_command


def help_usage(text):
    """command -> options, from the commands: list of `kiln --help`."""
    by_command, command = {}, None
    for line in text.splitlines():
        m = re.match(r"  ([a-z-]+)\b", line)
        if m and not line.startswith("   "):
            command = m.group(1)
        elif not (command and line.startswith("          ")):
            command = None
            continue
        elif not line.strip().startswith(("[", "-")):
            continue  # a description, not more options
        by_command.setdefault(command, set()).update(options(line))
    return by_command


docs = docs_usage(sys.argv[1])
helps = help_usage(sys.stdin.read())
failed = 0
for command in sorted(set(docs) | set(helps)):
    d, h = docs.get(command), helps.get(command)
    if d is None or h is None:
        print(f"{command}: only in {'--help' if d is None else 'docs/cli.md'}")
        failed += 1
        continue
    if d != h:
        print(f"{command}: docs/cli.md only {sorted(d - h)}, --help only {sorted(h - d)}")
        failed += 1
    else:
        print(f"{command}: {' '.join(sorted(d))}")
print(f"{len(set(docs) | set(helps)) - failed} commands agree, {failed} differ")
sys.exit(1 if failed else 0)
