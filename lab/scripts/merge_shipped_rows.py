#!/usr/bin/env python3
"""Merges re-tuned rows (an `fp8jit db export` document) into a shipped tuning document
(share/fp8jit/tuning/<gpu>.json): a row of the same GPU, op, problem and shape replaces the old
one where it stands, a new one goes at the end, and every other row keeps its text byte for byte,
so the commit's diff is the rows that changed. Writes a temporary file, checks that it parses
with the same row count as the merge predicts, then renames it over the shipped one.

Usage: python3 lab/scripts/merge_shipped_rows.py SHIPPED.json NEW.json
Exit status: 0 merged (prints what changed), 2 a bad argument (nothing written).
Do not run `git clang-format` over the result: clang-format 14 prefixes such a JSON file with
"x = " when it formats part of it.
"""
import json
import os
import sys

KEY_FIELDS = ("gpu", "op", "problem_key", "m", "n", "k")


def key(row):
    return tuple(row.get(f) for f in KEY_FIELDS)


def row_spans(text):
    """[(start, end, row)] of the "rows" array's elements in the document's text."""
    dec = json.JSONDecoder()
    i = text.index("[", text.index('"rows"')) + 1
    spans = []
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return spans, i
        row, end = dec.raw_decode(text, i)
        spans.append((i, end, row))
        i = end


def describe(row):
    c = row["best_config"]["config"]
    return (f"{json.loads(row['problem_key']).get('layout', 'dense')} {row['m']}x{row['n']}x{row['k']}: "
            f"{c['block_m']}x{c['block_n']} s{c['stages']} g{c['group_m']}")


def merge(text, new_rows):
    """The merged text and a line per changed row."""
    spans, close = row_spans(text)
    by_key = {key(r): r for r in new_rows}
    out, last, notes, seen = [], 0, [], set()
    for start, end, row in spans:
        k = key(row)
        if k not in by_key:
            continue
        indent = " " * (start - (text.rfind("\n", 0, start) + 1))
        out += [text[last:start], json.dumps(by_key[k], indent=2).replace("\n", "\n" + indent)]
        last = end
        seen.add(k)
        notes.append(f"replaced {describe(row)} -> {describe(by_key[k])}")
    added = [r for r in new_rows if key(r) not in seen]
    # New rows after the last one, then the array's close as it was.
    tail = spans[-1][1] if spans else close
    out.append(text[last:tail])
    for i, r in enumerate(added):
        comma = "," if spans or i > 0 else ""
        out.append(comma + "\n    " + json.dumps(r, indent=2).replace("\n", "\n    "))
        notes.append(f"added {describe(r)}")
    out.append(text[tail:])
    return "".join(out), notes


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    shipped, new = argv
    try:
        with open(shipped, encoding="utf-8") as f:
            text = f.read()
        with open(new, encoding="utf-8") as f:
            new_rows = json.load(f)["rows"]
        old_rows = json.loads(text)["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"merge_shipped_rows.py: {e}", file=sys.stderr)
        return 2
    merged, notes = merge(text, new_rows)
    want = len(old_rows) + sum(1 for r in new_rows if key(r) not in {key(o) for o in old_rows})
    if len(json.loads(merged)["rows"]) != want:
        print("merge_shipped_rows.py: the merged document lost rows; nothing written", file=sys.stderr)
        return 2
    tmp = shipped + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(merged)
    os.replace(tmp, shipped)
    print("\n".join(notes) or "no rows changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
