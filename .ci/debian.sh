# shellcheck shell=bash
# What .ci/arm64 and .ci/native share (sourced): the Debian mirror, arm64
# emulation, and running a command in a chroot.

# The mirror this machine's apt sources name: nothing here depends on where
# the machine is
mirror() {
  local uri
  uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $2 !~ /^\[/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$uri" ] || { echo "no Debian mirror in this machine's apt sources" >&2; exit 1; }
  echo "$uri"
}

# arm64 programs run here through binfmt_misc and qemu-aarch64-static
# (registered with the F flag: found from inside a chroot too)
emulation() {
  [ -x /usr/bin/qemu-aarch64-static ] || { echo "qemu-user-static is not installed" >&2; exit 1; }
  if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  fi
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    update-binfmts --enable qemu-aarch64
  fi
}

# in_chroot DIR CMD...: CMD in the chroot DIR with /proc, /dev, a fresh
# /dev/shm and /tmp, and an environment of its own (ORIBI_BUILD=0: nothing
# is compiled in there); the mounts live in a private mount namespace and
# vanish with it.
in_chroot() {
  unshare --mount --propagation private -- sh -ec '
    dir=$1; shift
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$dir/dev/shm"
    mount -t tmpfs -o mode=1777 tmpfs "$dir/tmp"
    exec chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
      PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin ORIBI_BUILD=0 "$@"' sh "$@"
}
