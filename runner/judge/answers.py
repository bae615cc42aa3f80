"""What the judge makes of its children's answers, and what it hands them: verdicts raised from
errors, tampering and malformed claims, outputs read from where a child left them, and the
seeds and sources of what the children run.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from kernelrank import vocab
from kernelrank.problems import ProblemSpec
from kernelrank.runner.results import CaseResult
from kernelrank.runner.containment.sandbox import ProtocolViolation, SubmissionProcess
from kernelrank.runner.judge.devmem import mib
from kernelrank.runner.judge.slots import AliasedOutput, SlotError, nbytes
from kernelrank.runner.slotformat import MAX_OUTPUT_DEPTH, MAX_OUTPUT_LEAVES



class RunEnded(Exception):
    """The run ends here with a verdict: ``status`` (a :class:`~kernelrank.vocab.Verdict`) and the
    ``message`` the author reads; raised by the judge's steps, caught once by the evaluation."""

    def __init__(self, status: vocab.Verdict, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class ReferenceFailed(RuntimeError):
    """The reference's child failed (a problem of the problem or the judge, not of the submission)."""


def mix_seed(secret: int, seed: int, iteration: int) -> int:
    """A 63-bit seed for iteration ``iteration`` of a case, derived from a secret with BLAKE2b;
    without the secret the child cannot predict it from the case's public seed."""
    digest = hashlib.blake2b(f"{secret}:{seed}:{iteration}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def reference_submission(spec: ProblemSpec) -> str:
    """The reference as a submission, so it is timed by exactly the code that times entries."""
    return spec.reference_source + "\n\ncustom_kernel = ref_kernel\n"


# -- helpers -----------------------------------------------------------------------------------
def raise_on_error(reply: dict[str, Any], where: str) -> None:
    if reply.get("ok"):
        return
    kind = reply.get("kind")
    message = str(reply.get("message", ""))[:4096]
    tb = str(reply.get("traceback", ""))[-8192:]
    detail = f"{message}\n{tb}".strip()
    if kind == vocab.Verdict.compile_error:
        raise RunEnded(vocab.Verdict.compile_error, f"compile error while {where}: {detail}" if where.startswith("load")
                       else f"compile error in {where}: {detail}")
    if kind == "runtime_error":
        raise RunEnded(vocab.Verdict.error, f"runtime error in {where}: {detail}")
    if kind == vocab.Verdict.out_of_memory:  # its allocator refused (torch.cuda.OutOfMemoryError)
        at = "while" if where.startswith("load") else "in"
        raise RunEnded(vocab.Verdict.out_of_memory, f"out of device memory {at} {where}: {detail}")
    raise ProtocolViolation(f"unexpected answer: {message}")


def raise_on_tampering(child: SubmissionProcess, reply: dict[str, Any], where: str) -> None:
    """The child's tripwire found functions the harness relies on replaced, or the objects it
    watches are no longer those of its ``hello`` answer, before the submission was imported
    (the record inside the child re-taken). See :mod:`~kernelrank.runner.submission.integrity`: a heuristic,
    not a guarantee; the judge's wall clock does not depend on it."""
    tampered = reply.get("tampered")
    if tampered:
        names = ", ".join(str(n)[:100] for n in list(tampered)[:10]) if isinstance(tampered, list) else "?"
        raise RunEnded(vocab.Verdict.rejected, f"rejected in {where}: the submission replaced functions the harness "
                                        f"relies on ({names})")
    if child.integrity is None or reply.get("integrity") != child.integrity:
        raise RunEnded(vocab.Verdict.rejected, f"rejected in {where}: the functions the harness relies on are no longer "
                                        f"those it started with (replaced, and the child's tripwire record re-taken)")


def raise_on_device_memory(child: SubmissionProcess, where: str) -> None:
    """After a request, the child frozen: it holds no more device memory than its budget, as the
    judge measures it (:class:`~kernelrank.runner.judge.devmem.DeviceMemoryWatch`; nothing to check
    without one, e.g. on the CPU).

    Raises:
        RunEnded: ``out_of_memory`` naming ``where`` (the case), the child killed first so that
            the reference and the judge get their memory back.
    """
    watch = child.device_memory
    held = watch.over() if watch is not None else None
    if held is None:
        return
    child.kill()
    at = "while" if where.startswith("load") else "in"
    raise RunEnded(vocab.Verdict.out_of_memory,
                   f"out of device memory {at} {where}: the {child.runs}'s processes held {mib(held)} of device memory "
                   f"after the request, more than the problem's budget of {mib(watch.budget)} per process "
                   f"(device_memory_mib); the process was killed")


def ns_list(value: Any, expected: int | None) -> list[int]:
    if (not isinstance(value, list) or not value or (expected is not None and len(value) != expected)
            or not all(type(t) is int and 0 <= t < 10**15 for t in value)):
        raise ProtocolViolation("the child answered malformed timings")
    return value


def out_room(ref: Any) -> int:
    """Bytes of the output slot a call gets: up to twice the reference's output (each of its
    tensors counted from an aligned start: a tuple's tensors follow one another in the slot)."""
    return 2 * nbytes(ref)


def read_output(child: SubmissionProcess, reply: dict[str, Any], index: int) -> Any:
    """The output an answer (or, in a request of several input sets, the ``index``-th call's
    part of it) describes, from the child's slot or memory, an output buffer's from the judge's
    own slot: a tensor, or a tuple, list or dict of them as the call returned it
    (:func:`read_tree`); ``None`` when it is neither.

    Raises:
        ProtocolViolation: an output description that does not fit its slot.
        RunEnded: ``failed``, an output in a mapping of the input slots (the child's own alias
            rule, :func:`~kernelrank.runner.submission.child._alias`, seen through another mapping).
    """
    if reply.get("out") is None or reply.get("alias"):  # an alias the child saw fails by its message
        return None
    try:
        return read_tree(child.arena, reply["out"], child.memory, index)
    except AliasedOutput as e:
        raise RunEnded(vocab.Verdict.failed, f"{child.runs}'s output {e}") from None
    except SlotError as e:
        raise ProtocolViolation(str(e)) from None


def read_tree(arena: Any, desc: Any, memory: Any, index: int) -> Any:
    """An output as the child described it (``{"tree": ...}``: a tuple, list or dict of tensor
    descriptions), each tensor read by the ``arena`` (:meth:`~kernelrank.runner.judge.slots.Arena.read_output`);
    a plain description is one tensor. Tensors of a container that are not output buffers or read
    from the child's memory must fit its output slot together.

    Raises:
        SlotError: a malformed tree, or more than :data:`~kernelrank.runner.slotformat.MAX_OUTPUT_LEAVES` tensors.
    """
    if not (isinstance(desc, dict) and "tree" in desc):
        return arena.read_output(desc, memory, index)
    count = [0]

    def walk(node: Any, depth: int) -> Any:
        if depth > MAX_OUTPUT_DEPTH:
            raise SlotError("an output nested too deeply")
        if isinstance(node, list):
            return [walk(x, depth + 1) for x in node]
        if not isinstance(node, dict):
            raise SlotError("malformed output tree")
        if "__tuple__" in node and isinstance(node["__tuple__"], list):
            return tuple(walk(x, depth + 1) for x in node["__tuple__"])
        if "__dict__" in node and isinstance(node["__dict__"], dict):
            return {str(k): walk(x, depth + 1) for k, x in node["__dict__"].items()}
        count[0] += 1
        if count[0] > MAX_OUTPUT_LEAVES:
            raise SlotError("an output of too many tensors")
        return arena.read_output(node, memory, index)

    return walk(desc["tree"], 0)


def data_nbytes(data: Any) -> int:
    """Bytes of every tensor in a (nested) value: tuples, lists and dicts walked."""
    if isinstance(data, torch.Tensor):
        return data.numel() * data.element_size()
    if isinstance(data, (tuple, list)):
        return sum(data_nbytes(x) for x in data)
    if isinstance(data, dict):
        return sum(data_nbytes(x) for x in data.values())
    return 0


def set_figures(r: CaseResult, figures: dict[str, Any]) -> None:
    for k, v in figures.items():
        setattr(r, k, v)
