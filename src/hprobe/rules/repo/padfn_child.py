"""The process `--pad-fn` runs the consumer's function in. hprobe runs this file's
text with `python -I -c`, so the child loads nothing of hprobe (no hprobe module
is in it unless the consumer's code imports one), and nothing the consumer's code
does (print, sys.exit, os._exit, a hang) reaches hprobe itself.

Protocol: a JSON request on stdin ({"spec", "counts", "out"}); one JSON object per
line appended to the file `out`: {"where"}, then per count {"calling"} before the
call and {"n", "value"} or {"n", "raises"} after it, and {"done"} at the end; or
{"error"} when the function cannot be loaded or called with one count.
"""

import importlib
import importlib.util
import inspect
import json
import os
import sys


def main() -> None:
    request = json.loads(sys.stdin.read())
    out = open(request["out"], "a", encoding="utf-8")

    def record(**item) -> None:
        out.write(json.dumps(item) + "\n")
        out.flush()

    spec = request["spec"]
    target, _, qualname = spec.rpartition(":")
    try:
        if target.endswith(".py"):
            module_spec = importlib.util.spec_from_file_location("hprobe_pad_fn", target)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"{target} is not a Python file")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module
            module_spec.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())  # MODULE:QUALNAME is looked up where the user runs hprobe
            module = importlib.import_module(target)
    except BaseException as exc:  # noqa: BLE001 - their import failing is their error, in one line
        record(error=f"importing {target} failed: {type(exc).__name__}: {exc}")
        return
    obj = module
    for part in qualname.split("."):
        if not hasattr(obj, part):
            record(error=f"{target} has no {qualname}")
            return
        obj = getattr(obj, part)
    if not callable(obj):
        record(error=f"{qualname} is not callable")
        return
    try:
        inspect.signature(obj).bind(1)
    except TypeError:
        record(error=f"{qualname}{inspect.signature(obj)} cannot be called with one head count")
        return
    except ValueError:
        pass  # a builtin without a signature: just call it
    try:
        record(where=[inspect.getsourcefile(obj) or target, inspect.getsourcelines(obj)[1]])
    except (OSError, TypeError):
        record(where=[target, None])
    for n in request["counts"]:
        record(calling=n)
        try:
            value = obj(n)
        except Exception as exc:  # noqa: BLE001 - the consumer's function refuses n
            record(n=n, raises=[type(exc).__name__, str(exc)[:500]])
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            record(n=n, value=repr(value)[:100])
        else:
            record(n=n, value=value)
    record(done=True)


main()
