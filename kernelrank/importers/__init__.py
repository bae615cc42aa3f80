"""Import the field's problems as KernelRank problems: GPU MODE folders and KernelBench files.

``kernelrank problems import gpumode DIR --name NAME`` and ``... kernelbench FILE --name NAME``
call :func:`import_gpumode` and :func:`import_kernelbench`; each writes into the configured problem
folders and returns an :class:`ImportReport` of what it derived and assumed. Given a folder of
problems, the command calls :func:`~kernelrank.importers.batch.import_tree`: one row per source.
"""

from kernelrank.importers.common import CPU_INPUT_BYTES, ImportReport, ProblemImportError
from kernelrank.importers.gpumode import import_gpumode
from kernelrank.importers.kernelbench import import_kernelbench

__all__ = ["CPU_INPUT_BYTES", "ImportReport", "ProblemImportError", "import_gpumode", "import_kernelbench"]
