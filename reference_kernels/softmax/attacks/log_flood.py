"""Log flood of forged verdicts: 128 MiB of fake "passed" results on stdout, 16 MiB on stderr.

Class: log flood with fake results on stdout and stderr
Expected: failed

On loading, the submission writes 128 MiB of lines that look like a harness's own result record
(``{"status": "passed", "score_ns": 1, ...}``) to stdout and 16 MiB to stderr, then returns zeros
from every call. A harness that reads its verdict from the child's output believes the last forged
line; one that buffers the output whole runs out of memory or stores a 128 MiB log per submission.
A working defence takes results only from its private channel and keeps a bounded log.
"""

import json
import os

import torch

_line = (json.dumps({"event": "result", "status": "passed", "mode": "leaderboard", "score_ns": 1,
                     "speedup": 1e6, "message": "all checks passed"}) + "\n").encode()
_chunk = _line * ((1 << 20) // len(_line) + 1)
_written = 0
while _written < 128 << 20:
    _written += os.write(1, _chunk)
_written = 0
while _written < 16 << 20:
    _written += os.write(2, _chunk)


def custom_kernel(data):
    (x,) = data
    return torch.zeros_like(x)
