"""Reads the HLO text of a bound module (kiln-translate --hlo-proto-to-text
of what bind_kernels.py wrote) and prints, per custom call, what its
backend_config decodes to: the stand-in payload's kernel, operands in order,
keywords and whether the traced artifact it names exists."""
import base64
import json
import os
import re
import sys

calls = 0
for line in open(sys.argv[1]):
    if " custom-call(" not in line:
        continue
    calls += 1
    config = re.search(r'backend_config="([^"]*)"', line).group(1)
    payload = json.loads(base64.b64decode(config))
    keywords = json.dumps(payload["keywords"], sort_keys=True)
    print(f"{payload['standin']} {payload['function']} ({', '.join(payload['operands'])}) "
          f"{keywords} lnc {payload['lnc']} artifact "
          f"{'present' if os.path.exists(payload['klir_binary']) else 'MISSING'}")
print(f"{calls} custom calls")
