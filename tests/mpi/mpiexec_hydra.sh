#!/bin/sh
# mpiexec_hydra.sh MPIEXEC ARGS... — MPICH's mpiexec (Hydra) run with the Open MPI-style arguments
# the MPI tests are written with, so that the same tests run under either MPI (cmake/mpi.cmake,
# -DRANKSNAP_MPI=mpich). Hydra passes the whole environment to the ranks, runs as root and puts
# more ranks than cores on a node as it is, so: -np N is -n N; -x NAME=VALUE is -genv NAME VALUE;
# -x NAME, --oversubscribe, --allow-run-as-root, --mca KEY VALUE, --bind-to X and --map-by X go.
# The program's own arguments are left alone, up to a ':' (another program of the job).
real=$1
shift
n=$#
opts=1
while [ "$n" -gt 0 ]; do
  a=$1
  shift
  n=$((n - 1))
  if [ "$a" = : ]; then
    opts=1
    set -- "$@" :
    continue
  fi
  if [ "$opts" = 0 ]; then
    set -- "$@" "$a"
    continue
  fi
  case $a in
    -np|-n) set -- "$@" -n "$1"; shift; n=$((n - 1)) ;;
    --oversubscribe|--allow-run-as-root) ;;
    --mca) shift 2; n=$((n - 2)) ;;
    --bind-to|--map-by) shift; n=$((n - 1)) ;;
    -x)
      case $1 in *=*) set -- "$@" -genv "${1%%=*}" "${1#*=}" ;; esac
      shift
      n=$((n - 1)) ;;
    -*) set -- "$@" "$a" ;;
    *) opts=0; set -- "$@" "$a" ;;
  esac
done
exec "$real" "$@"
