"""Top SASS instructions of an Nsight Compute source page (ncu -i REP --page source --csv
--print-source sass) by warp stall samples, with their executed counts: which instructions a
kernel waits on. Usage: python3 lab/probes/top_stalls.py PAGE.csv [N]"""
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    # Newer pages open with a "Kernel Name" row before the header.
    while lines and not lines[0].startswith('"Address"'):
        lines.pop(0)
    rows = list(csv.DictReader(lines))
    if not rows:
        sys.exit(f"{path}: no rows")
    cols = [c for c in rows[0].keys() if c is not None]
    stall = next((c for c in cols if "Stall Sampling (All" in c), None)
    execd = next((c for c in cols if c.startswith("Instructions Executed")), None)
    src = next((c for c in cols if c == "Source"), cols[1])
    addr = next((c for c in cols if c == "Address"), cols[0])
    print("columns:", cols[:12])
    total = sum(number(r.get(stall, "0")) for r in rows) or 1
    for r in sorted(rows, key=lambda r: -number(r.get(stall, "0")))[:top]:
        print(f"{r.get(addr, '')}\t{number(r.get(stall, '0')) / total:6.1%}\t{r.get(execd, '')}\t{r.get(src, '')[:90]}")


if __name__ == "__main__":
    main()
