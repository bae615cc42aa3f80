"""Leaves a chain of nested folders deeper than a recursive removal can go, and files in it.

Class: breaking the clean-up
Expected: error

After the job the judge removes the child's working folder. A recursive removal (Python 3.11's
``shutil.rmtree``) raises ``RecursionError`` on a chain 3,000 folders deep: the verdict is lost to a
"judge error" and, in leaderboard mode, timed processes and folders are left behind. On loading,
this attack builds such a chain (and locks its last folder) and then raises, so its verdict is an
error either way: what a working defence shows is that the judge still gave that verdict, killed
every process and left the scratch folder empty.
"""

import os

_fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for _ in range(3000):
    os.mkdir("d", dir_fd=_fd)
    _deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=_fd)
    os.close(_fd)
    _fd = _deeper
os.mkdir("locked", 0, dir_fd=_fd)
os.close(_fd)
raise RuntimeError("left a folder chain 3,000 deep for the judge to remove")


def custom_kernel(data):  # never reached
    return data[0]
