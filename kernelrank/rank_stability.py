"""How much a ranking moved when judged again: Kendall's tau-b between two rankings of the same
entries, and each entry's move. Pure and torch-free (the competitions service and its tests use it).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b between two rankings ``x`` and ``y`` of the same entries (``x[i]`` and
    ``y[i]`` are entry ``i``'s ranks or scores; equal values are ties), in [-1, 1]: 1 the same
    order, -1 the reverse.

    Over the n(n-1)/2 pairs of entries, with n_c pairs ordered alike in both (concordant), n_d
    ordered oppositely (discordant), n_x = sum over groups of t tied values in ``x`` of t(t-1)/2
    and n_y the same for ``y``::

        tau_b = (n_c - n_d) / sqrt((n0 - n_x) * (n0 - n_y)),   n0 = n(n-1)/2

    (a pair tied in ``x`` or ``y`` is neither concordant nor discordant). Source: M. G. Kendall,
    "The treatment of ties in ranking problems", Biometrika 33(3):239-251, 1945; the same
    statistic as ``scipy.stats.kendalltau(x, y, variant="b")``. O(n^2), for standings of at
    most a few hundred entries.

    Returns:
        ``None`` when it is undefined: fewer than two entries, or every value of ``x`` or of
        ``y`` tied (a zero denominator).

    Raises:
        ValueError: ``x`` and ``y`` differ in length.
    """
    if len(x) != len(y):
        raise ValueError(f"two rankings of the same entries: {len(x)} and {len(y)} values")
    n = len(x)
    n0 = n * (n - 1) // 2
    n_x = sum(t * (t - 1) // 2 for t in Counter(x).values())
    n_y = sum(t * (t - 1) // 2 for t in Counter(y).values())
    if n0 - n_x <= 0 or n0 - n_y <= 0:
        return None
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            s += (dx > 0 and dy > 0) or (dx < 0 and dy < 0)
            s -= (dx > 0 and dy < 0) or (dx < 0 and dy > 0)
    return s / math.sqrt((n0 - n_x) * (n0 - n_y))
