#!/bin/sh
# Two ranks of an mpirun job (MPIEXEC) on one GPU: PROGRAM (tests/gpu/test_shared_device.c)
# preloaded with libranksnap.so and the fake CUDA runtime (PRELOAD), sharing the fake device 0
# (FAKE_CUDA_SHARED), NVML being the fake one of FAKE_DIR (RANKSNAP_NVML). Rank r holds a pool
# of (r + 1) * 256 MiB, 32 MiB behind every allocator and a 64 MiB context when each writes
# DIR/CASE/held-rank-R: each one's own outside is 96 MiB, and the other's 352 or 608 MiB are not
# its. The case says what NVML can tell:
#   own            each rank's outside is its own (96.00 MiB), the device is named shared by ranks
#                  0 and 1 with what the other held, in the rank's file, `ranksnap report` of the
#                  files and the live report
#   pid_namespace  NVML lists other pids than the ranks' (a container's own pid namespace): each
#                  rank says its own use is not known and why, its column n/a, the device shared
#   no_nvml        RANKSNAP_NVML names no library: not known, NVML could not be loaded
#   torch          RANKSNAP_RECORDER=torch: the framework's metadata carries the rank's own
#                  outside bytes and what NVML listed
# usage: shared_device_job.sh CASE PROGRAM DIR MPIEXEC RANKSNAP PRELOAD FAKE_DIR
set -u
case=$1 program=$2 dir=$3/$1 mpiexec=$4 ranksnap=$5 preload=$6 fake=$7

rm -rf "$dir" && mkdir -p "$dir" || exit 1
export RANKSNAP_DIR="$dir" LD_PRELOAD="$preload" FAKE_CUDA_SHARED="$dir/device" \
       RANKSNAP_NVML="$fake/libnvidia-ml.so.1" FAKE_NVML_PID_OFFSET=0 RANKSNAP_RECORDER=ranksnap \
       RANKSNAP_REPORT=1
flag=
case $case in
    pid_namespace) FAKE_NVML_PID_OFFSET=1000000 ;;
    no_nvml) RANKSNAP_NVML="$fake/no-such-libnvidia-ml.so.1" ;;
    torch) RANKSNAP_RECORDER=torch RANKSNAP_REPORT=0 flag=--torch ;;
esac
out=$("$mpiexec" -np 2 --oversubscribe --allow-run-as-root --mca btl self,vader \
      -x LD_PRELOAD -x RANKSNAP_DIR -x FAKE_CUDA_SHARED -x RANKSNAP_NVML -x FAKE_NVML_PID_OFFSET \
      -x RANKSNAP_RECORDER -x RANKSNAP_REPORT "$program" $flag "$dir" 2>&1); rc=$?
echo "$out"
test $rc -eq 0 || exit 1
test "$(echo "$out" | grep -c 'all calls succeeded')" -eq 2 || exit 1
unset LD_PRELOAD

has() {
    case "$1" in *"$2"*) ;; *) echo "missing: $2"; exit 1 ;; esac
}
hasnt() {
    case "$1" in *"$2"*) echo "unexpected: $2"; exit 1 ;; esac
}

uuid=GPU-01000000-0000-0000-0000-000000000000
case $case in
own)
    s0=$("$ranksnap" summary "$dir/held-rank-0.rsnap") || exit 1; echo "$s0"
    s1=$("$ranksnap" summary "$dir/held-rank-1.rsnap") || exit 1; echo "$s1"
    has "$s0" "outside     peak 96.00 MiB, at end 96.00 MiB (this process's device memory"
    has "$s0" "sharing     2 processes on the device (NVML); the others hold 608.00 MiB, this one 352.00 MiB"
    has "$s1" "outside     peak 96.00 MiB, at end 96.00 MiB (this process's device memory"
    has "$s1" "sharing     2 processes on the device (NVML); the others hold 352.00 MiB, this one 608.00 MiB"
    r=$("$ranksnap" report "$dir"/held-rank-*.rsnap) || exit 1; echo "$r"
    has "$r" "$uuid is shared by ranks 0 and 1 (NVML listed 2 there); the others held 608.00 MiB as rank 0 saw them, 352.00 MiB as rank 1 saw them; each rank's outside is its own process's"
    for k in 0 1; do
        echo "$r" | grep -Eq "^[ *] +$k  .* 96\.00 MiB +- +no" || { echo "rank $k's outside is not its own 96.00 MiB"; exit 1; }
    done
    j=$("$ranksnap" report --json "$dir"/held-rank-*.rsnap) || exit 1
    has "$j" "\"outside_peak\": 100663296, \"outside_end\": 100663296"
    has "$j" "\"outside_of\": \"process\", \"device_uuid\": \"$uuid\", \"device_processes\": 2, \"device_others_bytes\": 637534208"
    has "$j" "\"shared_devices\": [
    {\"uuid\": \"$uuid\", \"ranks\": [0, 1], \"n_ranks\": 2, \"processes\": 2}"
    # the live report at MPI_Finalize: the peaks are the held ones, the device named shared
    live=$(cat "$dir/report.txt") || exit 1; echo "$live"
    has "$live" "$uuid is shared by ranks 0 and 1"
    for k in 0 1; do
        echo "$live" | grep -Eq "^[ *] +$k  .* 96\.00 MiB +" || { echo "live: rank $k's outside is not its own 96.00 MiB"; exit 1; }
    done
    ;;
pid_namespace)
    s0=$("$ranksnap" summary "$dir/held-rank-0.rsnap") || exit 1; echo "$s0"
    has "$s0" "the device's use beyond the allocator, every process's"
    has "$s0" "not own     this process's own use was not known (pid_not_listed: this process (pid "
    has "$s0" "is not among the 2 processes NVML lists on the device"
    r=$("$ranksnap" report "$dir"/held-rank-*.rsnap) || exit 1; echo "$r"
    has "$r" "rank 0: its own device memory is not known (its pid is not among the processes NVML lists on its device: a container with its own pid namespace?"
    has "$r" "rank 1: its own device memory is not known (its pid is not among"
    has "$r" "$uuid is shared by ranks 0 and 1 (NVML listed 2 there)"
    hasnt "$r" "the others held"
    hasnt "$r" "its own process's"
    for k in 0 1; do
        echo "$r" | grep -Eq "^[ *] +$k  .* n/a +- +no" || { echo "rank $k's outside column is not n/a"; exit 1; }
    done
    ;;
no_nvml)
    r=$("$ranksnap" report "$dir"/held-rank-*.rsnap) || exit 1; echo "$r"
    has "$r" "rank 0: its own device memory is not known (NVML could not be loaded or started where it ran: RANKSNAP_NVML names the library"
    has "$r" "outside counts its device's whole use beyond its allocator, every process on it: "
    # NVML said nothing: the device is shared as the ranks' UUIDs say, with no count
    has "$r" "$uuid is shared by ranks 0 and 1
"
    s0=$("$ranksnap" summary "$dir/held-rank-0.rsnap") || exit 1; echo "$s0"
    has "$s0" "(nvml_unusable: NVML not loaded: $fake/no-such-libnvidia-ml.so.1"
    ;;
torch)
    m0=$(cat "$dir/held-rank-0.json") || exit 1; echo "$m0"
    m1=$(cat "$dir/held-rank-1.json") || exit 1; echo "$m1"
    has "$m0" "\"processes\": 2, \"others_bytes\": 637534208, \"own_bytes\": 369098752}"
    has "$m0" "\"framework_reserved_bytes\": 268435456, \"outside_bytes_peak\": 100663296, \"outside_bytes_end\": 100663296, \"outside_of\": \"process\""
    has "$m1" "\"processes\": 2, \"others_bytes\": 369098752, \"own_bytes\": 637534208}"
    has "$m1" "\"framework_reserved_bytes\": 536870912, \"outside_bytes_peak\": 100663296, \"outside_bytes_end\": 100663296, \"outside_of\": \"process\""
    ;;
*) echo "no such case: $case"; exit 2 ;;
esac
exit 0
