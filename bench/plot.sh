#!/usr/bin/env bash
# Charts of a bench results directory, written next to the data (gnuplot; awk, no python):
#   DIR/gemm.csv   -> DIR/gemm_tflops_<scale>.png  TFLOP/s per shape, fp8jit next to cuBLASLt
#                     DIR/gemm_roofline.png        fp8jit's fraction of the memory roofline, M <= 128
#   DIR/quant.json -> DIR/quant_bandwidth.png      quantize/dequantize GB/s next to the copy
#   (or DIR/quant.csv when there is no quant.json)
# Usage: bash bench/plot.sh DIR        PLOT_TERM=png|pngcairo overrides the terminal choice.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gp="$here/plot.gp"
dir=${1:-}
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "usage: bash bench/plot.sh DIR   (DIR holds gemm.csv and/or quant.json)" >&2
  exit 2
fi
command -v gnuplot >/dev/null 2>&1 || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -f "$gp" ] || { echo "plot.sh: $gp missing" >&2; exit 1; }

term=${PLOT_TERM:-}
if [ -z "$term" ]; then
  terms=$(gnuplot -e 'set terminal' 2>&1 </dev/null || true)
  case "$terms" in *pngcairo*) term=pngcairo ;; *) term=png ;; esac
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp8jit-plot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
made=0

# plot CHART DATA OUT TITLE SUBTITLE [more gnuplot assignments]
plot() {
  local chart=$1 data=$2 out=$3 title=${4//\'/} subtitle=${5//\'/} extra=${6:-}
  # gnuplot writes into the temporary directory (no quoting trouble with DIR), then the PNG is moved.
  gnuplot -e "chart='$chart'; data='$data'; out='$tmp/chart.png'; term='$term'; title='$title'; subtitle='$subtitle'; $extra" "$gp"
  [ -s "$tmp/chart.png" ] || { echo "plot.sh: gnuplot wrote nothing for $out" >&2; exit 1; }
  mv -f "$tmp/chart.png" "$out"
  echo "$out"
  made=$((made + 1))
}

# ---- GEMM -----------------------------------------------------------------------------------
# Columns are found by name in the header (m,n,k,scale,provider,status,time_us,tflops,
# ratio_to_cublaslt,roofline_fraction,kernel: bench/gemm_report.cpp).
# shellcheck disable=SC2016  # awk program text
gemm_awk='
BEGIN { FS = "," }
{ sub(/\r$/, "") }
NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
/^[[:space:]]*$/ || /^#/ { next }
{
  key = $col["m"] "x" $col["n"] "x" $col["k"]
  sc = $col["scale"]; pr = $col["provider"]
  ok = ($col["status"] == "passed" || $col["status"] == "") && ($col["tflops"] + 0) > 0
}'

csv="$dir/gemm.csv"
if [ -f "$csv" ]; then
  head -1 "$csv" | grep -q 'provider' || { echo "plot.sh: $csv has no gemm.csv header" >&2; exit 1; }
  scales=$(awk "$gemm_awk"'
    pr == "fp8jit" && !(sc in seen) { seen[sc] = 1; print sc }' "$csv")
  [ -n "$scales" ] || echo "plot.sh: no fp8jit rows in $csv" >&2
  for sc in $scales; do
    safe=$(printf '%s' "$sc" | tr -c 'A-Za-z0-9_-' '_')
    dat="$tmp/tflops_$safe.dat"
    # "MxNxK" fp8jit cublaslt "ratio"; then a summary line on fd 3 (peer?, ymax, geomean text)
    summary=$(awk -v want="$sc" "$gemm_awk"'
      sc != want { next }
      pr == "fp8jit" {
        if (!(key in idx)) { idx[key] = ++n; order[n] = key }
        f[key] = ok ? $col["tflops"] + 0 : "?"
        r[key] = ("ratio_to_cublaslt" in col) ? $col["ratio_to_cublaslt"] + 0 : 0
      }
      pr == "cublaslt" { c[key] = ok ? $col["tflops"] + 0 : "?" }
      END {
        fp8 = 0; peer = 0; ymax = 0; ls = 0; nr = 0
        for (i = 1; i <= n; ++i) {
          key = order[i]; cv = (key in c) ? c[key] : "?"
          ratio = r[key]
          if (ratio <= 0 && f[key] != "?" && cv != "?") ratio = f[key] / cv
          if (cv == "?" || f[key] == "?") ratio = 0
          if (cv != "?") peer = 1
          if (f[key] != "?") fp8 = 1
          if (f[key] != "?" && f[key] > ymax) ymax = f[key]
          if (cv != "?" && cv > ymax) ymax = cv
          if (ratio > 0) { ls += log(ratio); ++nr }
          rl = (ratio > 0) ? sprintf("%.2fx", ratio) : ""
          printf "\"%s\" %s %s \"%s\"\n", key, f[key], cv, rl > out
        }
        gm = nr > 0 ? sprintf("geometric mean %.3fx cuBLASLt over %d shapes", exp(ls / nr), nr) : ""
        printf "%d %d %.0f %s\n", fp8, peer, ymax * 1.12 + 1, gm
      }' out="$dat" "$csv")
    read -r fp8 peer ymax gm <<<"$summary"
    if [ "$fp8$peer" = 11 ]; then
      title="GEMM TFLOP/s, scale mode $sc: fp8jit and cuBLASLt on the same inputs"
      sub="above the fp8jit bars: its speed relative to cuBLASLt (cuBLASLt time / fp8jit time)${gm:+; $gm}"
    elif [ "$fp8" = 1 ]; then
      title="GEMM TFLOP/s, scale mode $sc: fp8jit"; sub="no cuBLASLt results in this run"
    elif [ "$peer" = 1 ]; then
      title="GEMM TFLOP/s, scale mode $sc: cuBLASLt"; sub="no fp8jit results in this run"
    else
      echo "plot.sh: no results for scale mode $sc in $csv: no chart" >&2
      continue
    fi
    plot tflops "$dat" "$dir/gemm_tflops_$safe.png" "$title" "$sub" \
      "fp8=$fp8; peer=$peer; ymax=$ymax"
  done

  # fp8jit's roofline fraction (percent) for M <= 128: one column per scale mode.
  dat="$tmp/roofline.dat"
  ncol=$(awk "$gemm_awk"'
    pr != "fp8jit" || ($col["m"] + 0) > 128 || !("roofline_fraction" in col) || $col["roofline_fraction"] == "" { next }
    {
      if (!(sc in sidx)) { sidx[sc] = ++ns; sname[ns] = sc }
      if (!(key in idx)) { idx[key] = ++n; order[n] = key }
      v[key, sc] = ok ? 100 * $col["roofline_fraction"] : "?"
    }
    END {
      if (n == 0) { print 0; exit }
      printf "shape" > out
      for (j = 1; j <= ns; ++j) printf " \"%s\"", sname[j] > out
      printf "\n" > out
      for (i = 1; i <= n; ++i) {
        printf "\"%s\"", order[i] > out
        for (j = 1; j <= ns; ++j) printf " %s", ((order[i], sname[j]) in v) ? v[order[i], sname[j]] : "?" > out
        printf "\n" > out
      }
      print ns + 1
    }' out="$dat" "$csv")
  if [ "$ncol" -gt 1 ]; then
    plot roofline "$dat" "$dir/gemm_roofline.png" "fp8jit GEMM, M <= 128 (bandwidth-bound): fraction of the memory roofline" \
      "roofline time = (MK + NK + 2MN) bytes at the measured copy bandwidth; per scale mode" \
      "ncol=$ncol; ymax=105"
  else
    echo "plot.sh: no M <= 128 rows with a roofline fraction in $csv: no gemm_roofline.png" >&2
  fi
else
  echo "plot.sh: no $csv: GEMM charts skipped" >&2
fi

# ---- quantize / dequantize --------------------------------------------------------------------
dat="$tmp/quant.dat"
: > "$dat"
if [ -f "$dir/quant.json" ]; then
  # Google Benchmark JSON: split at braces and commas so that every line is one "key": value.
  # shellcheck disable=SC2020
  tr '{},' '\n\n\n' < "$dir/quant.json" | awk '
    function flush() {
      if (name != "" && !err && (rt == "" || rt == "iteration") && gbps != "" &&
          name ~ /^BM_(Quantize1x128|Dequantize128x128)\//) {
        split(name, p, "/")
        what = p[1] ~ /Quantize/ ? "quantize 1x128" : "dequantize 128x128"
        printf "\"%s\\n%sx%s\" %s %s %s\n", what, p[2], p[3], gbps, copy == "" ? "?" : copy, pct == "" ? "?" : pct
      }
      name = ""; rt = ""; gbps = ""; copy = ""; pct = ""; err = 0
    }
    {
      line = $0
      if (!match(line, /"[^"]*"[[:space:]]*:/)) next
      key = substr(line, RSTART + 1, RLENGTH - 1); sub(/"[[:space:]]*:$/, "", key)
      val = substr(line, RSTART + RLENGTH); gsub(/^[[:space:]]+|[[:space:]]+$/, "", val); gsub(/"/, "", val)
      if (key == "name") { flush(); name = val }
      else if (key == "run_type") rt = val
      else if (key == "error_occurred") err = (val == "true")
      else if (key == "GBps") gbps = val + 0
      else if (key == "copy_GBps") copy = val + 0
      else if (key == "pct_of_copy") pct = val + 0
    }
    END { flush() }' > "$dat"
  src="$dir/quant.json"
elif [ -f "$dir/quant.csv" ]; then
  # quant.csv (bench_quant.cpp): problem,m,k,status,time_us,gbps,copy_gbps,pct_of_copy,kernel
  awk -F, '
    { sub(/\r$/, "") }
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    $col["status"] == "passed" {
      printf "\"%s\\n%sx%s\" %s %s %s\n", $col["problem"], $col["m"], $col["k"], $col["gbps"] + 0, $col["copy_gbps"] + 0, $col["pct_of_copy"] + 0
    }' "$dir/quant.csv" > "$dat"
  src="$dir/quant.csv"
fi
if [ -s "$dat" ]; then
  ymax=$(awk '{ for (i = NF - 2; i <= NF - 1; ++i) if ($i != "?" && $i + 0 > m) m = $i + 0 } END { printf "%.0f", m * 1.12 + 1 }' "$dat")
  plot quant "$dat" "$dir/quant_bandwidth.png" \
    "Quantize / dequantize bandwidth next to a device-to-device copy of the same bytes" \
    "above the kernel bars: % of the copy bandwidth (bytes read + written once each; median of 30 L2-flushed runs)" \
    "ymax=$ymax"
elif [ -n "${src:-}" ]; then
  echo "plot.sh: no BM_Quantize1x128 / BM_Dequantize128x128 results in $src: no quant_bandwidth.png" >&2
fi

[ "$made" -gt 0 ] || { echo "plot.sh: nothing to plot in $dir" >&2; exit 1; }
