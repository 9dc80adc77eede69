"""Small pieces shared by the peer benchmark's modules (no torch, no GPU): the log line, the
status exceptions and result records, and how an error is shortened for a table cell."""
import re
import time

T0 = time.time()


def log(*args):
    print(f"[{time.time() - T0:7.1f}s]", *args, flush=True)


class NotApplicable(Exception):
    """The provider has no such scale mode (status n/a)."""


class Unsupported(Exception):
    """The provider refuses this mode or shape (status unsupported)."""


def result(status, **kw):
    r = {"status": status}
    r.update({k: v for k, v in kw.items() if v is not None})
    return r


def short_error(e, limit=240):
    text = f"{type(e).__name__}: {e}".replace("\n", " ")
    m = re.search(r"(CUBLAS_STATUS_\w+) when calling `(\w+)", text)
    if m:  # torch's cuBLAS errors quote the whole call
        text = f"cuBLASLt: {m.group(1)} from {m.group(2)}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_text(path):
    """The stripped text of a small file, or None where it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None
