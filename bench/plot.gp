# Charts of a bench results directory; driven by bench/plot.sh, which writes the data files.
#   gnuplot -e "chart='tflops'; data='F'; out='F.png'; term='pngcairo'; title='...'; subtitle='...'; ymax=1500; fp8=1; peer=1" bench/plot.gp
# chart:
#   tflops    data rows: "MxNxK" fp8jit_tflops cublaslt_tflops "ratio"   (missing values: ?)
#   roofline  data: a header "shape <scale>..." then rows "MxNxK" percent...; ncol = number of columns
#   quant     data rows: "problem" kernel_GBps copy_GBps pct_of_copy
if (!exists("term")) term = 'pngcairo'
if (!exists("peer")) peer = 1
if (!exists("fp8")) fp8 = 1
if (!exists("ncol")) ncol = 2
if (!exists("ymax")) ymax = 0
if (!exists("subtitle")) subtitle = ''
W = chart eq 'tflops' ? 1400 : chart eq 'roofline' ? 1250 : 1100
H = chart eq 'quant' ? 620 : 720
if (term eq 'pngcairo') {
  set terminal pngcairo size W,H noenhanced font 'DejaVu Sans,11'
} else {
  set terminal png size W,H noenhanced
}
set output out
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9 relative
set grid ytics lc rgb '#d0d0d0'
set xtics rotate by 45 right nomirror scale 0
set ytics nomirror
set key top left opaque box
set border 3
set title title . (subtitle ne '' ? "\n" . subtitle : '') font ',13'
set bmargin 9
set lmargin 10
if (ymax > 0) { set yrange [0:ymax] } else { set yrange [0:*] }

c_fp8 = '#1f77b4'
c_peer = '#ff7f0e'
c_copy = '#9a9a9a'

if (chart eq 'tflops') {
  set ylabel 'TFLOP/s (higher is better)'
  set xlabel 'shape M x N x K'
  # two boxes per cluster (gap 1): centres at x -/+ 1/6
  if (fp8 && peer) {
    plot data using 2:xtic(1) title 'fp8jit' lc rgb c_fp8, \
         '' using 3 title 'cuBLASLt' lc rgb c_peer, \
         '' using ($0 - 1.0/6):2:4 with labels offset 0,0.7 font ',8' notitle
  } else {
    set style histogram clustered gap 0.5
    if (fp8) {
      plot data using 2:xtic(1) title 'fp8jit' lc rgb c_fp8
    } else {
      plot data using 3:xtic(1) title 'cuBLASLt' lc rgb c_peer
    }
  }
}

if (chart eq 'roofline') {
  set ylabel '% of the memory roofline (higher is better)'
  set xlabel 'shape M x N x K'
  set key autotitle columnheader
  n = ncol - 1
  w = 1.0 / (n + 1)
  colors = "#1f77b4 #2ca02c #d62728 #9467bd #8c564b #17becf"
  plot for [i=2:ncol] data using i:xtic(1) lc rgb word(colors, (i - 2) % 6 + 1), \
       for [i=2:ncol] '' using ($0 + (i - 2 - (n - 1) / 2.0) * w):(column(i)):(sprintf('%.0f', column(i))) \
         with labels offset 0,0.7 font ',8' notitle
}

if (chart eq 'quant') {
  set ylabel 'GB/s (bytes read + written once each)'
  set xlabel ''
  set xtics rotate by 0 center
  set bmargin 5
  plot data using 2:xtic(1) title 'fp8jit kernel' lc rgb c_fp8, \
       '' using 3 title 'device-to-device copy, same bytes' lc rgb c_copy, \
       '' using ($0 - 1.0/6):2:(sprintf('%.1f%%', $4)) with labels offset 0,0.7 font ',9' notitle
}
set output
