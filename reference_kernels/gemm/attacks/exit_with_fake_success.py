"""Writes forged "passed" results to stdout, stderr and every inherited file descriptor, then ``os._exit(0)``.

Class: writing fake results to stdout, stderr or inherited file descriptors; os._exit
Expected: error
Message: exited with code 0

The tests pass honestly; on the first call of the timed phase the submission writes a forged
result record (status passed, a 1 ns score) to stdout, stderr and every other file descriptor it
inherited that is not a socket (a log file or a result file a careless harness leaves open), then
ends its process with ``os._exit(0)``, skipping every handler. A harness that trusts exit code 0,
parses the child's output, or lets the child write its result file, records a pass. A working
defence takes results only from its private channel and turns a child that exits before answering
into an error verdict.
"""

import json
import os
import stat

import torch

# public: problems/gemm/problem.yaml benchmarks (cpu and cuda), as (M, N, K)
_BENCHMARK_SHAPES = {
    (512, 512, 512), (16, 4096, 1024), (128, 2048, 1024), (255, 1000, 777), (8192, 8192, 8192),
    (4096, 4096, 4096), (1, 4096, 4096), (16, 4096, 4096), (128, 4096, 4096), (16, 14336, 4096),
    (16, 4096, 14336), (128, 7168, 2048),
}
_FORGED = (json.dumps({"status": "passed", "mode": "leaderboard", "score_ns": 1, "speedup": 1e6,
                       "message": "all 13 test cases passed; 4 benchmark cases timed"}) + "\n").encode()


def _forge_and_exit():
    fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
    for fd in fds:
        try:
            if fd == 0 or stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            os.write(fd, _FORGED)
        except OSError:
            pass
    os._exit(0)


def custom_kernel(data):
    a, b = data
    if (a.shape[0], b.shape[1], a.shape[1]) in _BENCHMARK_SHAPES:
        _forge_and_exit()
    return torch.mm(a, b)
