"""The GPU-free part of the peer benchmark: shape lists, roofline arithmetic, speed ratios, geometric
means and the report (markdown, CSV, JSON). Standard library only: the CPU self-test runs it all."""
import csv
import io
import json
import math
import os
import re

PROVIDERS = ("fp8jit", "deepgemm", "deepgemm2", "cublaslt")
PROVIDER_TITLES = {"fp8jit": "fp8jit", "deepgemm": "DeepGEMM v1", "deepgemm2": "DeepGEMM 2.6.1",
                   "cublaslt": "cuBLASLt"}
SHORT_TITLES = {"fp8jit": "fp8jit", "deepgemm": "v1", "deepgemm2": "2.6.1", "cublaslt": "cuBLASLt"}
# Two DeepGEMMs: v1 is faster at small M, 2.6.1 at large M. The peer to beat is the faster of the two,
# shape by shape: the made-up peer BEST_DEEPGEMM takes, per row, the lower time of those that ran
# and passed the check.
DEEPGEMMS = ("deepgemm", "deepgemm2")
BEST_DEEPGEMM = "deepgemm_best"
PEERS = ("deepgemm", "deepgemm2", BEST_DEEPGEMM, "cublaslt")
PEER_TITLES = dict(PROVIDER_TITLES, **{BEST_DEEPGEMM: "best DeepGEMM"})
# A second fp8jit (another build of it, e.g. the tree a change is measured against) joins as a
# provider and a peer when gemm_peers.py is given --lib-base: timed in the same profiling window
# of each shape as the first, so drift between runs (G78, G79: the longest kernels move 5-10 %
# from one run to the next) falls on both alike. enable_baseline() adds it.
BASELINE = "fp8jit_base"


def enable_baseline(title="fp8jit base"):
    """Adds BASELINE to the providers and, last, to the peers (its ratio: base time / fp8jit
    time, > 1 where the build under test is faster). Idempotent."""
    global PROVIDERS, PEERS, CSV_FIELDS
    if BASELINE in PROVIDERS:
        return
    PROVIDERS = PROVIDERS + (BASELINE,)
    PEERS = PEERS + (BASELINE,)
    PROVIDER_TITLES[BASELINE] = PEER_TITLES[BASELINE] = title
    SHORT_TITLES[BASELINE] = "base"
    CSV_FIELDS = csv_fields()


def disable_baseline():
    """The providers and peers without BASELINE again (the self-test's clean-up)."""
    global PROVIDERS, PEERS, CSV_FIELDS
    PROVIDERS = tuple(p for p in PROVIDERS if p != BASELINE)
    PEERS = tuple(p for p in PEERS if p != BASELINE)
    CSV_FIELDS = csv_fields()


# tensor-fast: per-tensor scales with the whole K sum in the tensor cores (fp8jit accum=fast,
# cuBLASLt use_fast_accum); block is 1x128 activations x 128x128 weights.
SCALES = ("block", "tensor", "tensor-fast")
DECODE_MAX_M = 128  # rows up to this M are memory-bound: they get a roofline fraction
ERROR_LIMIT = 1e-2  # relative Frobenius error above this is flagged (bf16 output)
SHAPES_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shapes"))


class InputError(ValueError):
    """Bad input from the command line or a shape file: the message names what and where."""


class Shape:
    __slots__ = ("m", "n", "k", "label")

    def __init__(self, m, n, k, label=""):
        self.m, self.n, self.k, self.label = m, n, k, label

    def mnk(self):
        return (self.m, self.n, self.k)

    def __repr__(self):
        return f"{self.m}x{self.n}x{self.k}"


def _ceil_div(a, b):
    return -(-a // b)


def resolve_shape_list(name):
    """A suite name of bench/shapes (deepseek-v3 is deepseek_v3.csv) or a path to a CSV."""
    if os.sep in name or name.endswith(".csv"):
        path = name
    else:
        path = os.path.join(SHAPES_DIR, name.replace("-", "_") + ".csv")
    if not os.path.isfile(path):
        known = sorted(f[:-4].replace("_", "-") for f in os.listdir(SHAPES_DIR) if f.endswith(".csv")) \
            if os.path.isdir(SHAPES_DIR) else []
        raise InputError(f"--shapes {name}: no such file {path} (suites: {', '.join(known) or 'none'}; "
                         f"or give a path to an m,n,k CSV)")
    return path


def list_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def read_shapes(path):
    """m,n,k rows, as strictly as the fp8jit CLI reads them: '#' lines and blank lines skipped, one
    optional m,n,k header, three positive integers a row, K a multiple of 16. A comment line right
    before a group of rows names the group (the label shown in the report)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InputError(f"--shapes {path}: cannot be read ({e.strerror})") from e
    shapes, label, last_comment = [], "", None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            last_comment = None
            continue
        if line.startswith("#"):
            last_comment = line[1:].strip().split(":")[0].strip()
            continue
        if not shapes and line.replace(" ", "") == "m,n,k":
            last_comment = None
            continue
        if last_comment is not None:
            label, last_comment = last_comment, None
        where = f"{path}:{number}"
        fields = [x.strip() for x in line.split(",")]
        if len(fields) != 3:
            raise InputError(f"{where}: \"{line[:80]}\" has {len(fields)} fields, expected m,n,k")
        if not all(re.fullmatch(r"[0-9]+", x) for x in fields):
            raise InputError(f"{where}: \"{line[:80]}\" is not an m,n,k row of positive integers")
        m, n, k = (int(x) for x in fields)
        if min(m, n, k) < 1 or max(m, n, k) > 2**31 - 1:
            raise InputError(f"{where}: m, n and k must be in [1, 2^31-1]")
        if k % 16:
            raise InputError(f"{where}: k = {k} must be a multiple of 16 (TMA needs 16-byte rows)")
        shapes.append(Shape(m, n, k, label))
    if not shapes:
        raise InputError(f"{path}: no m,n,k rows (a CSV with lines such as 4096,7168,2048)")
    return shapes


def parse_choice_list(value, allowed, option):
    items = [x.strip() for x in value.split(",") if x.strip()]
    if not items:
        raise InputError(f"{option}: empty (choose from {','.join(allowed)})")
    bad = [x for x in items if x not in allowed]
    if bad:
        raise InputError(f"{option}: unknown {', '.join(bad)} (choose from {','.join(allowed)})")
    return list(dict.fromkeys(items))


# ---- roofline -----------------------------------------------------------------------------------

def scale_bytes(m, n, k, scale):
    if scale == "block":  # fp32: one per 1x128 group of A, one per 128x128 block of B
        kb = _ceil_div(k, 128)
        return 4 * (m * kb + _ceil_div(n, 128) * kb)
    return 8  # one fp32 scalar per operand


def gemm_bytes(m, n, k, scale):
    """Bytes a GEMM must move at least: FP8 A and B read once, bf16 D written once, the scales."""
    return m * k + n * k + 2 * m * n + scale_bytes(m, n, k, scale)


def copy_bandwidth(copy_bytes, seconds):
    """A device-to-device copy reads and writes each byte: both count."""
    return 2 * copy_bytes / seconds


def matched_copy_bytes(m, n, k, scale):
    """The size of a device-to-device copy that moves as many bytes (read + written) as the GEMM
    must: half of them each way. Timed beside the GEMM, it is the roofline at that size, launch
    and ramp included, which a copy of 1 GiB does not see: a kernel of a few microseconds cannot
    reach the large copy's bandwidth, whatever it computes."""
    return max(1, (gemm_bytes(m, n, k, scale) + 1) // 2)


def roofline_fraction(m, n, k, scale, us, bandwidth):
    """Fraction of the copy bandwidth the GEMM's bytes reach in `us` microseconds."""
    if not us or not bandwidth or us <= 0:
        return None
    return gemm_bytes(m, n, k, scale) / bandwidth / (us * 1e-6)


# ---- profiler events ----------------------------------------------------------------------------

def median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def split_by_flush(events, is_flush, expected):
    """Device events (name, start_ns, duration_ns) of one profiled region -> `expected` groups, one
    per timed call: the events after each flush and before the next one. The region is
    flush, call, flush, call, ..., flush: events before the first flush and after the last one
    (the closing flush, then the synchronisation) belong to no call. Raises ValueError when the
    number of calls found differs from `expected` or a call launched nothing on the device."""
    events = sorted(events, key=lambda e: e[1])
    groups, current, seen_flush = [], None, False
    for name, start, dur in events:
        if is_flush(name):
            if current is not None:
                groups.append(current)
            current, seen_flush = [], True
        elif seen_flush:
            current.append((name, start, dur))
    # `current` now holds whatever followed the closing flush: not a call.
    if len(groups) != expected:
        raise ValueError(f"the profiler shows {len(groups)} flushed calls, expected {expected}")
    empty = [i for i, g in enumerate(groups) if not g]
    if empty:
        raise ValueError(f"{len(empty)} of {expected} calls launched no device work (first: call {empty[0]})")
    return groups


def short_kernel_name(name, limit=60):
    """A kernel's name without template arguments and parameters ('void ns::k<...>(...)' -> 'ns::k')."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    depth, out = 0, []
    for ch in s:
        if ch in "<(":
            if depth == 0 and ch == "(":
                break
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip() or name.strip()
    return s if len(s) <= limit else s[:limit - 3] + "..."


def call_times(groups, calls_per_combo):
    """Per combination (consecutive runs of calls_per_combo groups): the kernel time of each call
    in µs (the sum of its device events' durations) and the distinct kernel names."""
    out = []
    for c in range(0, len(groups), calls_per_combo):
        chunk = groups[c:c + calls_per_combo]
        times = [sum(d for _, _, d in g) / 1e3 for g in chunk]
        names = list(dict.fromkeys(short_kernel_name(n) for g in chunk for n, _, _ in g))
        out.append((times, names))
    return out


def interleaved_call_times(groups, combos):
    """call_times for calls made in rounds (combination 0, 1, ..., combos - 1, then again): call
    i * combos + j is combination j's i-th. Rounds spread a stretch of lower clocks (throttling,
    another tenant) over every provider of a shape instead of the one timed in it."""
    if combos < 1 or len(groups) % combos:
        raise ValueError(f"{len(groups)} calls do not split into rounds of {combos} combinations")
    return call_times([g for j in range(combos) for g in groups[j::combos]], len(groups) // combos)


# ---- ratios and summaries -----------------------------------------------------------------------

def geomean(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError("geomean of a non-positive value")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def speed_ratio(peer_us, fp8jit_us):
    """Peer time over fp8jit time: above 1 means fp8jit is faster."""
    if not peer_us or not fp8jit_us:
        return None
    return peer_us / fp8jit_us


# Result statuses: ok (timed, error within ERROR_LIMIT); bad (timed, error above it: shown with
# '!', left out of the ratios); nan (NaN in the output: unwritten or broken, not timed); error (the
# call failed: message in 'note'); unsupported (the provider refused this scale mode or shape);
# n/a (the provider has no such mode: DeepGEMM per tensor); skipped (not asked for).
NEUTRAL_STATUSES = ("ok", "skipped", "n/a")


def result_of(row, provider):
    return row["providers"].get(provider) or {"status": "skipped"}


def timed_ok(row, provider):
    r = result_of(row, provider)
    return r["status"] == "ok" and bool(r.get("us"))


def best_deepgemm(row):
    """(µs, provider) of the faster DeepGEMM on this row among those timed with a correct result
    (the lower time; v1 on a tie), else None."""
    timed = [(result_of(row, p)["us"], p) for p in DEEPGEMMS if timed_ok(row, p)]
    return min(timed) if timed else None


def peer_us(row, peer):
    """A peer's time on this row when it ran and passed the check, else None."""
    if peer == BEST_DEEPGEMM:
        best = best_deepgemm(row)
        return best[0] if best else None
    return result_of(row, peer)["us"] if timed_ok(row, peer) else None


def row_ratio(row, peer):
    if not timed_ok(row, "fp8jit"):
        return None
    return speed_ratio(peer_us(row, peer), result_of(row, "fp8jit")["us"])


def row_roofline(row, provider, bandwidth):
    if row["m"] > DECODE_MAX_M or not timed_ok(row, provider):
        return None
    return roofline_fraction(row["m"], row["n"], row["k"], row["scale"], result_of(row, provider)["us"], bandwidth)


def row_copy_share(row, provider):
    """The same-size copy's time over the provider's (1: as fast as moving its bytes can be at
    that size), for M <= DECODE_MAX_M rows timed with their copy."""
    if row["m"] > DECODE_MAX_M or not timed_ok(row, provider) or not row.get("copy_us"):
        return None
    return row["copy_us"] / result_of(row, provider)["us"]


def shape_text(row):
    return f"{row['m']}x{row['n']}x{row['k']}"


def summarize(rows, bandwidth):
    """Per scale mode: geometric mean, worst shape and count below 1 of each peer ratio (rows where
    both ran correctly; for the best DeepGEMM also how many rows each DeepGEMM won and on how
    many both ran), the M <= 128 roofline geometric mean of each provider, and the flagged
    results (statuses other than ok, skipped and n/a)."""
    out = {}
    for scale in dict.fromkeys(r["scale"] for r in rows):
        mine = [r for r in rows if r["scale"] == scale]
        s = {"rows": len(mine), "vs": {}, "roofline": {}, "copy_share": {}}
        for peer in PEERS:
            pairs = [(row_ratio(r, peer), r) for r in mine]
            pairs = [(x, r) for x, r in pairs if x is not None]
            if pairs:
                worst = min(pairs, key=lambda p: p[0])
                best = max(pairs, key=lambda p: p[0])
                s["vs"][peer] = {"geomean": geomean([x for x, _ in pairs]), "shapes": len(pairs),
                                 "worst": worst[0], "worst_shape": shape_text(worst[1]),
                                 "best": best[0], "best_shape": shape_text(best[1]),
                                 "below_1": sum(1 for x, _ in pairs if x < 1.0)}
                if peer == BEST_DEEPGEMM:  # which DeepGEMM set the bar, and how often both did run
                    winners = [best_deepgemm(r)[1] for _, r in pairs]
                    s["vs"][peer]["won"] = {p: winners.count(p) for p in DEEPGEMMS}
                    s["vs"][peer]["both"] = sum(1 for _, r in pairs if all(timed_ok(r, p) for p in DEEPGEMMS))
        for p in PROVIDERS:
            fr = [row_roofline(r, p, bandwidth) for r in mine]
            fr = [x for x in fr if x is not None]
            if fr:
                s["roofline"][p] = {"geomean": geomean(fr), "shapes": len(fr), "min": min(fr), "max": max(fr)}
            cs = [x for x in (row_copy_share(r, p) for r in mine) if x is not None]
            if cs:
                s["copy_share"][p] = {"geomean": geomean(cs), "shapes": len(cs), "min": min(cs), "max": max(cs)}
        s["flagged"] = [f"{shape_text(r)} {PROVIDER_TITLES[p]}: {result_of(r, p)['status']}"
                        + (f" ({result_of(r, p)['note']})" if result_of(r, p).get("note") else "")
                        for r in mine for p in PROVIDERS if result_of(r, p)["status"] not in NEUTRAL_STATUSES]
        out[scale] = s
    return out


# ---- report -------------------------------------------------------------------------------------

def _fmt(x, spec):
    return "" if x is None else format(x, spec)


def _md_escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def cell_time(r):
    st = r["status"]
    if st == "ok":
        return f"{r['us']:.1f}"
    if st == "bad" and r.get("us"):
        return f"{r['us']:.1f}!"
    return {"skipped": "", "n/a": "n/a"}.get(st, st)


def check_text(row):
    notes = []
    for p in PROVIDERS:
        r = result_of(row, p)
        if r["status"] == "bad":
            notes.append(f"{PROVIDER_TITLES[p]} err {_fmt(r.get('rel_err'), '.1e')}")
        elif r["status"] not in NEUTRAL_STATUSES:
            notes.append(f"{PROVIDER_TITLES[p]} {r['status']}")
    return "; ".join(notes) or "ok"


def ratio_cell(row, peer):
    """The ratio; for the best DeepGEMM with the one that set it, e.g. '0.904 (v1)'."""
    text = _fmt(row_ratio(row, peer), ".3f")
    if peer == BEST_DEEPGEMM and text:
        text += f" ({SHORT_TITLES[best_deepgemm(row)[1]]})"
    return text


def vs_cell(v, peer):
    """A summary cell: geomean (shapes), worst at, count below 1 [; DeepGEMM wins]."""
    if not v:
        return "-"
    text = f"**{v['geomean']:.3f}x** ({v['shapes']}), {v['worst']:.3f}x at {v['worst_shape']}, {v['below_1']}"
    if peer == BEST_DEEPGEMM:
        text += ("; won " + " / ".join(f"{SHORT_TITLES[p]} {v['won'][p]}" for p in DEEPGEMMS)
                 + f" (both ran: {v['both']})")
    return text


def markdown_section(title, rows, summary, bandwidth, level=2):
    """One shape list: the per-shape table, then the summary per scale mode."""
    h = "#" * level
    out = [f"{h} {title}", ""]
    roof_title = " / ".join(SHORT_TITLES[p] for p in PROVIDERS)
    out.append("| M | N | K | scale | " + " | ".join(f"{PROVIDER_TITLES[p]} µs" for p in PROVIDERS) + " | "
               + " | ".join(f"{PEER_TITLES[p]} / fp8jit" for p in PEERS) + f" | roofline {roof_title} | check |")
    out.append("| ---: | ---: | ---: | --- |" + " ---: |" * (len(PROVIDERS) + len(PEERS)) + " --- | --- |")
    for r in rows:
        roof = [row_roofline(r, p, bandwidth) for p in PROVIDERS]
        roof_text = "" if all(x is None for x in roof) else " / ".join(_fmt(x, ".2f") or "-" for x in roof)
        out.append(f"| {r['m']} | {r['n']} | {r['k']} | {r['scale']} | "
                   + " | ".join(cell_time(result_of(r, p)) for p in PROVIDERS) + " | "
                   + " | ".join(ratio_cell(r, p) for p in PEERS)
                   + f" | {roof_text} | {_md_escape(check_text(r))} |")
    out += ["", f"{h}# {title}: summary", "",
            "| scale | " + " | ".join(f"vs {PEER_TITLES[p]}: geomean (shapes), worst, below 1" for p in PEERS)
            + f" | roofline M <= {DECODE_MAX_M} geomean: {roof_title}"
            + f" | same-size copy / time, M <= {DECODE_MAX_M} geomean: {roof_title} | flagged |",
            "| --- |" + " --- |" * (len(PEERS) + 3)]
    for scale, s in summary.items():
        vs = [vs_cell(s["vs"].get(peer), peer) for peer in PEERS]
        roof = " / ".join(_fmt(s["roofline"].get(p, {}).get("geomean"), ".2f") or "-" for p in PROVIDERS)
        share = " / ".join(_fmt(s["copy_share"].get(p, {}).get("geomean"), ".2f") or "-" for p in PROVIDERS)
        out.append(f"| {scale} | " + " | ".join(vs) + f" | {roof} | {share} | {len(s['flagged'])} |")
    flagged = [f for s in summary.values() for f in s["flagged"]]
    if flagged:
        out += ["", "Flagged: " + "; ".join(_md_escape(f) for f in flagged[:40])
                + (f"; ... ({len(flagged) - 40} more)" if len(flagged) > 40 else "")]
    return "\n".join(out) + "\n"


def markdown(title, sections, bandwidth, meta_lines=()):
    """sections: [(list title, rows, summary)]."""
    out = [f"# {title}", ""]
    out += [f"{x}  " for x in meta_lines]
    out += ["", "Kernel time (µs): device-side kernel durations from the CUDA profiler (kineto/CUPTI), "
            "summed over the device work of one call (kernels, and memsets where a library issues them), L2 flushed (a 256 MiB write, not counted) before each "
            "call, median of the timed calls after warm-up; the Python wrappers' host time is not in it "
            "for any provider. Ratios are peer time / fp8jit time (> 1: fp8jit is faster); geomeans "
            "cover the shapes where both ran and passed the check. Best DeepGEMM: per shape the faster of "
            "DeepGEMM v1 and 2.6.1 among those that ran and passed the check (the peer to beat; its cell "
            "names which, its summary how many shapes each won). Roofline (M <= "
            f"{DECODE_MAX_M}) = bytes of A, B, D and scales / the device-to-device copy bandwidth "
            f"({_fmt(bandwidth and bandwidth / 1e12, '.2f')} TB/s, read + write, same run) / kernel time. "
            "Same-size copy / time (M <= "
            f"{DECODE_MAX_M}): the kernel time of a device-to-device copy that moves as many bytes (read + "
            "written) as the GEMM must, timed with the shape's calls, over the provider's time: the "
            "roofline at that size, launch and ramp included. "
            f"! marks a result whose relative error against the float64 reference is above {ERROR_LIMIT:g}; "
            "n/a: the provider has no such scale mode.", ""]
    for list_title, rows, summary in sections:
        out.append(markdown_section(list_title, rows, summary, bandwidth))
    return "\n".join(out)


def csv_fields():
    return ["list", "label", "m", "n", "k", "scale"] + \
        [f"{p}_{x}" for p in PROVIDERS for x in ("us", "status", "rel_err")] + \
        [f"{BEST_DEEPGEMM}_us", BEST_DEEPGEMM] + \
        [f"ratio_{p}" for p in PEERS] + [f"roofline_{p}" for p in PROVIDERS] + \
        ["copy_us"] + [f"copy_share_{p}" for p in PROVIDERS] + \
        [f"config_{p}" for p in PROVIDERS] + [f"kernels_{p}" for p in PROVIDERS] + [f"note_{p}" for p in PROVIDERS]


CSV_FIELDS = csv_fields()


def csv_text(rows, bandwidth):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        d = {x: r.get(x, "") for x in ("list", "label", "m", "n", "k", "scale")}
        d["copy_us"] = _fmt(r.get("copy_us"), ".3f")
        for p in PROVIDERS:
            res = result_of(r, p)
            d[f"{p}_us"] = _fmt(res.get("us"), ".3f")
            d[f"{p}_status"] = res["status"]
            d[f"{p}_rel_err"] = _fmt(res.get("rel_err"), ".3e")
            d[f"roofline_{p}"] = _fmt(row_roofline(r, p, bandwidth), ".4f")
            d[f"copy_share_{p}"] = _fmt(row_copy_share(r, p), ".4f")
            d[f"config_{p}"] = res.get("config") or ""
            d[f"kernels_{p}"] = " + ".join(res.get("kernels") or [])
            d[f"note_{p}"] = res.get("note") or ""
        best = best_deepgemm(r)
        d[f"{BEST_DEEPGEMM}_us"] = _fmt(best and best[0], ".3f")
        d[BEST_DEEPGEMM] = best[1] if best else ""
        for peer in PEERS:
            d[f"ratio_{peer}"] = _fmt(row_ratio(r, peer), ".4f")
        w.writerow(d)
    return buf.getvalue()


def json_safe(x):
    """x with every non-finite float replaced by None (JSON has no NaN or infinity)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def write_report(out_dir, name, title, lists, bandwidth, meta, meta_lines=()):
    """name.md, name.csv and name.json in out_dir for several shape lists, each reported on its
    own (table and summary): lists = [(list name, list title, rows)]. Returns the markdown and
    the summaries ({list name: {scale: summary}})."""
    sections, summaries, all_rows = [], {}, []
    for list_name_, list_title, rows in lists:
        summary = summarize(rows, bandwidth)
        summaries[list_name_] = summary
        sections.append((list_title, rows, summary))
        all_rows += rows
    md = markdown(title, sections, bandwidth, meta_lines)
    files = {f"{name}.md": md, f"{name}.csv": csv_text(all_rows, bandwidth),
             f"{name}.json": json.dumps(json_safe({"meta": meta, "copy_bandwidth_bytes_per_s": bandwidth,
                                                   "summary": summaries, "rows": all_rows}),
                                        indent=1, default=str, allow_nan=False) + "\n"}
    os.makedirs(out_dir, exist_ok=True)
    for fname, text in files.items():
        tmp = os.path.join(out_dir, fname + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out_dir, fname))
    return md, summaries


def summary_lines(summaries):
    """Short text of the summaries, one line per list and scale mode (the end of the run's log)."""
    out = []
    for list_name_, summary in summaries.items():
        for scale, s in summary.items():
            parts = [f"{list_name_:<13} {scale:<11}"]
            for peer in PEERS:
                v = s["vs"].get(peer)
                parts.append(f"vs {PEER_TITLES[peer]} " +
                             (f"{v['geomean']:.3f}x ({v['shapes']}, worst {v['worst']:.3f}x at {v['worst_shape']})"
                              if v else "-"))
            roof = "/".join(_fmt(s["roofline"].get(p, {}).get("geomean"), ".2f") or "-" for p in PROVIDERS)
            parts.append(f"roofline M<={DECODE_MAX_M} {'/'.join(SHORT_TITLES[p] for p in PROVIDERS)} {roof}")
            share = "/".join(_fmt(s["copy_share"].get(p, {}).get("geomean"), ".2f") or "-" for p in PROVIDERS)
            parts.append(f"same-size copy {share}")
            parts.append(f"flagged {len(s['flagged'])}")
            out.append("  ".join(parts))
    return out
