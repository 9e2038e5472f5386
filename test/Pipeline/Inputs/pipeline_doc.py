"""Checks that docs/architecture.md draws the passes of the Kiln pipeline in
the order buildKilnPipeline adds them.

usage: pipeline_doc.py PIPELINE_DUMP ARCHITECTURE_MD
PIPELINE_DUMP is kiln-opt's --dump-pass-pipeline output for a pipeline with
every optional pass on; the doc's first code block is the diagram, whose
passes down to "(stage Hlo)" are checked.
"""
import re
import sys

dump, doc = (open(p).read() for p in sys.argv[1:3])
built = re.findall(r"^\s+([a-z][a-z0-9-]*)(?:\{|,|$)", dump.split("builtin.module(", 1)[1],
                   re.M)
# Up to the hlo module: the compiled-mode stages after it are kiln-hlo-to-llvm's.
diagram = doc.split("```", 2)[1].split("(stage Hlo)", 1)[0]
drawn = [p for p in re.findall(r"\b(kiln-[a-z0-9-]+|cse)\b", diagram) if p != "kiln-opt"]
if built != drawn:
    sys.exit("docs/architecture.md draws the passes as\n  %s\nbut the pipeline runs\n  %s"
             % (" ".join(drawn), " ".join(built)))
print("%d passes, in the pipeline's order" % len(built))
