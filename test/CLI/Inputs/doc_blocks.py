"""The fenced blocks of a Markdown file, for the scripts that check the docs
against the tools (check_help_vs_docs.py, check_readme_outputs.py,
run_doc_commands.py)."""


def fenced_blocks(path):
    """(info string, lines) of each ``` block of `path`: "" for a bare fence."""
    block, info = None, None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("```"):
            if block is None:
                block, info = [], line[3:].strip()
            else:
                yield info, block
                block = None
        elif block is not None:
            block.append(line)
