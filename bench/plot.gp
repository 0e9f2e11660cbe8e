# CDFs of the Allocate and update latencies, kdp vs the Go reference.
#   gnuplot -e "dir='OUT/samples'; out='OUT/bench-latency.png'" bench/plot.gp
# Each samples file holds one latency in us per line (bench/bench.py).
if (!exists("dir")) dir = "build/bench/samples"
if (!exists("out")) out = "build/bench/bench-latency.png"
if (!exists("title_extra")) title_extra = ""

set terminal pngcairo size 1200,460 font "sans,10"
set output out
set multiplot layout 1,2 title "kdp-example-gopher vs the Go reference (grpc-go): latency CDFs".title_extra
set logscale x
set xlabel "latency (us, log scale)"
set ylabel "fraction of calls"
set yrange [0:1]
set grid
set key bottom right
# cumulative: sort the samples, then plot rank/n against the value
cdf(f) = sprintf("< sort -g '%s/%s' | awk '{v[NR]=$1} END {for (i=1;i<=NR;i++) print v[i], i/NR}'", dir, f)

set title "Allocate (one device, sequential, grpc-go client)"
plot cdf("alloc_kdp.txt") using 1:2 with lines lw 2 lc rgb "#1f77b4" title "kdp, unpinned", \
     cdf("alloc_go.txt") using 1:2 with lines lw 2 lc rgb "#d62728" title "Go, unpinned", \
     cdf("alloc_pinned_kdp.txt") using 1:2 with lines lw 2 dt 2 lc rgb "#1f77b4" title "kdp, one core", \
     cdf("alloc_pinned_go.txt") using 1:2 with lines lw 2 dt 2 lc rgb "#d62728" title "Go, one core"

set title "update (device file created -> ListAndWatch message received)"
plot cdf("update_kdp.txt") using 1:2 with lines lw 2 lc rgb "#1f77b4" title "kdp", \
     cdf("update_go.txt") using 1:2 with lines lw 2 lc rgb "#d62728" title "Go"
unset multiplot
