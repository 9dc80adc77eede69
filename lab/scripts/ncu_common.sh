# Shared by lab/scripts/profile.sh and lab/scripts/profile_configs.sh (sourced): the Nsight Compute sections
# and metrics both collect, and the lines of a log their summaries keep.

# Issue rate, eligible warps, stall reasons, and the units' share of their peaks.
ncu_sections=(--section SpeedOfLight --section SchedulerStats --section WarpStateStats)
# Shared-memory traffic of the wgmmas (operand reads), and the pipe's busy share.
ncu_gmma_metrics=l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum
ncu_gmma_metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed
ncu_summary_lines='gmma|wavefronts|[Ss]tall|Issued Warp|Eligible|SM Active|Compute \(SM\)|Warp Cycles Per Issued|Duration'
