"""Prints a forged passing result, then ``sys.exit(0)`` in the middle of the timed phase.

Class: sys.exit with a forged result on stdout
Expected: error
Message: SystemExit

The tests pass honestly. On the first call of a benchmark case the submission prints, to stdout and
stderr, a result record that looks like the harness's own (status passed, a 1 ns score), then
raises ``SystemExit(0)``. A harness that runs the submission in its own process stops with exit code
0 and the forged output as its last words; one that parses stdout or trusts the exit code records a
pass. A working defence catches the exit, takes results only from its private channel and gives an
error verdict.
"""

import json
import sys

import torch

PAGE_SIZE = 64
D_V = 512
# public: problems/mla_decode/problem.yaml benchmarks, as (b, s_q, h_q, seqlen of sequence 0)
_BENCHMARKS = {(4, 1, 16, 512), (2, 1, 16, 1024), (1, 1, 16, 2048), (2, 2, 16, 512), (128, 1, 16, 4096),
               (128, 1, 16, 8192), (128, 1, 128, 4096), (128, 1, 128, 8192), (128, 2, 128, 8192)}


def _attention(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    b, s_q, h_q, d = q.shape
    n = block_table.shape[1] * PAGE_SIZE
    kv = kv_cache[block_table.long()].view(b, n, d)
    pos = torch.arange(n, device=q.device)
    lens = cache_seqlens.long()
    kv = torch.where((pos[None, :] < lens[:, None])[:, :, None], kv.float(), 0.0)
    scores = torch.matmul(q.float().view(b, s_q * h_q, d), kv.transpose(1, 2)).view(b, s_q, h_q, n) * softmax_scale
    visible = lens[:, None] - s_q + 1 + torch.arange(s_q, device=q.device)[None, :]
    scores = scores.masked_fill(~(pos[None, None, :] < visible[:, :, None])[:, :, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1).view(b, s_q * h_q, n)
    return torch.matmul(p, kv[:, :, :D_V]).view(b, s_q, h_q, D_V).to(q.dtype)


def custom_kernel(data):
    q, cache_seqlens = data[0], data[3]
    b, s_q, h_q, _ = q.shape
    if (b, s_q, h_q, int(cache_seqlens[0])) in _BENCHMARKS:
        forged = json.dumps({"status": "passed", "mode": "leaderboard", "score_ns": 1, "speedup": 1e6,
                             "message": "all 13 test cases passed; 4 benchmark cases timed"})
        print(forged, flush=True)
        print(forged, file=sys.stderr, flush=True)
        sys.exit(0)
    return _attention(data)
