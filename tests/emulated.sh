#!/bin/sh
# emulated.sh — runs a command in which aarch64 programs run as if native, under qemu-user: the
# tests of the aarch64 cross build, scripts that start programs included, on an x86-64 machine.
#
# Where the kernel already hands aarch64 programs to qemu (binfmt_misc, e.g. Debian's
# qemu-user-binfmt), the command runs as it is. Else it runs in a user namespace with a
# binfmt_misc of its own (Linux 6.7 and later mount one per user namespace), in which qemu's
# static build is registered with the F flag (the kernel opens it now, so that it is found from
# any mount namespace): nothing outside the namespace changes, and the registration ends with its
# last process. Inside, the user is root of the namespace: files are still created as the
# caller's. Exits 77, saying why on stderr, where neither is possible.
# usage: emulated.sh COMMAND [ARGS...]    (emulated.sh true: can aarch64 programs run here?)
set -u
why() { echo "$*" >&2; exit 77; }
qemu=$(command -v qemu-aarch64-static) || why "no qemu-aarch64-static (Debian's qemu-user-static)"
if grep -qs '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
  exec "$@"
fi
if [ "${RS_EMULATED_INSIDE:-}" = 1 ]; then
  unset RS_EMULATED_INSIDE
  # the ELF header of an aarch64 executable (e_ident, e_type 2 or 3, e_machine 183), as Debian's
  # qemu-user-static registers it; binfmt_misc reads the \x escapes itself
  magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null &&
    printf ':qemu-aarch64:M::%s:%s:%s:F\n' "$magic" "$mask" "$qemu" \
      > /proc/sys/fs/binfmt_misc/register 2>/dev/null ||
    why "this kernel ($(uname -r)) gives a user namespace no binfmt_misc of its own" \
        "(Linux 6.7 and later do), and none hands aarch64 programs to qemu (qemu-user-binfmt)"
  exec "$@"
fi
command -v unshare >/dev/null || why "no unshare (util-linux) to make a user namespace"
unshare --user --map-root-user --mount true 2>/dev/null ||
  why "no user namespace can be made here (unshare --user --mount failed)"
RS_EMULATED_INSIDE=1 exec unshare --user --map-root-user --mount sh "$0" "$@"
