"""What this machine's transformers calls for its fine-grained FP8 linear layers (for
python/examples/hf_fp8_client.py): version, module file, FP8 names, FP8Linear.forward's source."""
import inspect

import transformers
from transformers.integrations import finegrained_fp8 as fg

print("transformers", transformers.__version__, fg.__file__)
print("names:", sorted(n for n in dir(fg) if not n.startswith("__")))
for cls in ("FP8Linear",):
    if hasattr(fg, cls):
        print(inspect.getsource(getattr(fg, cls).forward))
for fn in dir(fg):
    obj = getattr(fg, fn)
    if inspect.isfunction(obj) and ("quant" in fn or "matmul" in fn):
        print(f"def {fn}{inspect.signature(obj)}")
for fn in ("fp8_linear", "finegrained_fp8_linear", "load_finegrained_fp8_kernel", "_load_finegrained_fp8_kernel"):
    if hasattr(fg, fn):
        print(f"--- {fn}")
        print("\n".join(inspect.getsource(getattr(fg, fn)).splitlines()[:80]))
