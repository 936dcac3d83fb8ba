#!/usr/bin/env bash
# Builds ring3's Debian 12 (bookworm) i386 root filesystem: an ext4 image for the guest's
# virtio disk, and the unpacked tree beside it (the native benchmark chroots into it).
# Usage: rootfs/build.sh DIR IMAGE [INIT]   (mk/rootfs.mk: build/rootfs build/rootfs.img)
#   DIR/tree                the root (mmdebstrap, minbase + gcc, make, sysvinit, gdb, strace)
#   DIR/patch-2.7.6.tar.xz  GNU patch's upstream source, also in the root's /usr/src
#   IMAGE                   ext4 of DIR/tree, 2 GiB sparse, label ring3-root
# INIT is sysvinit (the default) or systemd: the same root with systemd as PID 1 and
# ring3-console as a unit of its own (rootfs/ring3-console.service).
# Packages come from the mirror that the system's apt sources name. Needs root (mmdebstrap's
# root mode, chroot, file ownership); through sudo when not root.
set -euo pipefail

[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 DIR IMAGE [sysvinit|systemd]" >&2; exit 2; }
INIT=${3:-sysvinit}
case "$INIT" in
sysvinit|systemd) ;;
*) echo "rootfs: INIT=$INIT: the root's init is sysvinit or systemd" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    exec sudo -- "$0" "$@"
fi
umask 022

here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "$1")
image=$(realpath -m "$2")
tree=$out/tree
new=$out/tree.tmp
work=$out/work

SUITES="bookworm bookworm-updates bookworm-security"
PATCH_VERSION=2.7.6
IMAGE_SIZE=2G
# minbase (Essential, Priority: required, apt) plus these, without recommends.
# xz-utils: tar needs xz for the .tar.xz; e2fsprogs: fsck.ext4 for checkroot.sh; gdb and
# strace: debuggers inside the guest (tests/test_debian.py).
PACKAGES=gcc,make,patch,libc6-dev,e2fsprogs,procps,xz-utils,gdb,strace
# init: sysvinit's, or systemd's (dbus for systemctl's and logind's bus, udev for devices).
if [ "$INIT" = systemd ]; then
    PACKAGES=$PACKAGES,systemd-sysv,dbus,udev
else
    PACKAGES=$PACKAGES,sysvinit-core
fi
# CPython and its own regression tests (tests/test_debian.py runs some against the kernel).
PACKAGES=$PACKAGES,python3,libpython3.11-testsuite
# the network: DHCP at boot, ssh in, and what measures it
PACKAGES=$PACKAGES,ifupdown,isc-dhcp-client,openssh-server,iputils-ping,iperf3
# Boot scripts that have nothing to do in ring3's guest: no RTC device (hwclock.sh), no
# configfs (mount-configfs), no backlight (brightness). There is no udev, kmod or networking
# script to remove: minbase has none of them.
RC_REMOVE="hwclock.sh mount-configfs brightness"

die() { echo "rootfs: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
start=$(now)

# Nothing may be mounted under DIR when it is removed (rm would reach the host's /dev).
if awk -v d="$out/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    die "something is still mounted under $out; unmount it first"
fi
clean() { rm -rf --one-file-system "$@"; }
clean "$new" "$work"
rm -f "$image.tmp"
mkdir -p "$work"

# --- The mirror: the system's apt entries for bookworm, bookworm-updates and the security
# suite with the main component, as "URI SUITE" lines, in apt's order (sources.list, then
# sources.list.d/*.list and *.sources; one-line and deb822 formats).
one_line() {
    awk '{ sub(/#.*/, "") }
         $1 == "deb" {
             line = $0; gsub(/\[[^]]*\]/, "", line); n = split(line, w)
             for (i = 4; i <= n; i++) if (w[i] == "main") { print w[2], w[3]; break }
         }'
}
deb822() {
    awk 'function flush(    nu, ns, u, s, i, j) {
             if (f["types"] ~ /(^|[ \t])deb([ \t]|$)/ && f["components"] ~ /(^|[ \t])main([ \t]|$)/ &&
                 tolower(f["enabled"]) !~ /no/) {
                 nu = split(f["uris"], u); ns = split(f["suites"], s)
                 for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j]
             }
             split("", f); key = ""
         }
         /^#/ { next }
         /^[ \t]*$/ { flush(); next }
         /^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }
         { i = index($0, ":"); key = tolower(substr($0, 1, i - 1)); f[key] = substr($0, i + 1) }
         END { flush() }'
}
system_entries() {
    local list parts f
    eval "$(apt-config shell list Dir::Etc::SourceList/f parts Dir::Etc::SourceParts/d)"
    {
        if [ -f "$list" ]; then one_line < "$list"; fi
        for f in "$parts"*; do
            case "$f" in
            *.list) one_line < "$f" ;;
            *.sources) deb822 < "$f" ;;
            esac
        done
    } | awk -v suites="$SUITES" 'BEGIN { split(suites, s); for (i in s) want[s[i]] = 1 }
                                 want[$2] && !seen[$0]++'
}

# apt-get with sources, lists and caches of its own under $1 (sources in $1/sources.list):
# nothing of the system's apt state changes.
apt_private() {
    local dir=$1
    shift
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts"
    apt-get -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts="$dir/parts" \
        -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" \
        -o APT::Sandbox::User=root "$@"
}

mapfile -t entries < <(system_entries)
[ ${#entries[@]} -gt 0 ] || die "no apt source of the system names Debian's $SUITES (main)"

# mmdebstrap fails on any index that does not download. A mirror caught mid-sync fails one;
# such an entry is tried again and then left out, except bookworm itself.
mirror=()
n=0
for e in "${entries[@]}"; do
    n=$((n + 1))
    d=$work/probe-$n
    mkdir -p "$d"
    echo "deb [arch=i386] $e main" > "$d/sources.list"
    ok=
    for try in 1 2 3; do
        if apt_private "$d" update --error-on=any > "$d/log" 2>&1; then ok=1; break; fi
        [ $try -eq 3 ] || sleep 3
    done
    if [ -n "$ok" ]; then
        mirror+=("$e")
    elif [ "${e#* }" = bookworm ]; then
        cat "$d/log" >&2
        die "cannot read the i386 index of $e"
    else
        echo "rootfs: warning: leaving out $e, whose i386 index does not download:" >&2
        grep -E '^(E|Err):' "$d/log" | head -3 | sed 's/^/rootfs:   /' >&2 || true
    fi
done
printf 'rootfs: mirror: %s main\n' "${mirror[@]}"

# --- GNU patch's upstream source, from Debian's source package.
src=$work/source
mkdir -p "$src/files"
printf 'deb-src %s main\n' "${mirror[@]}" > "$src/sources.list"
apt_private "$src" update > "$src/log" 2>&1 ||
    echo "rootfs: warning: apt-get update of the deb-src entries reported errors" >&2
(cd "$src/files" && apt_private "$src" source --download-only patch >> "$src/log" 2>&1) ||
    { cat "$src/log" >&2; die "apt-get source --download-only patch failed"; }
orig=$src/files/patch_$PATCH_VERSION.orig.tar.xz
[ -f "$orig" ] || die "Debian's source of patch is not $PATCH_VERSION: $(ls "$src/files")"
cp "$orig" "$out/patch-$PATCH_VERSION.tar.xz.tmp"
mv "$out/patch-$PATCH_VERSION.tar.xz.tmp" "$out/patch-$PATCH_VERSION.tar.xz"

# --- The root. The merged-usr hook installs usr-is-merged in place of usrmerge, which would
# bring perl. Documentation, manuals and translations are left out (dpkg path-exclude, which
# stays in the root for packages installed later).
lines=()
for e in "${mirror[@]}"; do lines+=("deb $e main"); done
echo "rootfs: mmdebstrap (log: $1/mmdebstrap.log)"
t=$(now)
mmdebstrap --mode=auto --variant=minbase --arch=i386 --include="$PACKAGES" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$new" "${lines[@]}" > "$out/mmdebstrap.log" 2>&1 ||
    { tail -40 "$out/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
echo "rootfs: mmdebstrap took $(since "$t") s"

in_root() {
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
        chroot "$new" "$@"
}

# --- ring3's configuration: init, the console program, names, the root's fstab and fsck.
install -m 755 "$here/ring3-console" "$new/usr/local/sbin/ring3-console"
if [ "$INIT" = systemd ]; then
    # The console program is a unit; no getty competes for the serial console (the kernel's
    # console= would make systemd start one there), and there is no VT.
    install -m 644 "$here/ring3-console.service" "$new/etc/systemd/system/ring3-console.service"
    in_root systemctl enable ring3-console.service
    in_root systemctl mask serial-getty@ttyS0.service getty@tty1.service
else
    install -m 644 "$here/inittab" "$new/etc/inittab"
fi
install -m 644 "$here/fstab" "$new/etc/fstab"
install -m 644 "$here/e2fsck.conf" "$new/etc/e2fsck.conf"
echo ring3 > "$new/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tring3\n' > "$new/etc/hosts"
rm -f "$new/etc/resolv.conf"                    # the host's; dhclient writes the guest's
install -m 644 "$here/interfaces" "$new/etc/network/interfaces"
install -m 644 "$here/dhclient.conf" "$new/etc/dhcp/dhclient.conf"
# ssh as root with a key (Debian's sshd allows root no password): the public keys of the
# user who builds the image, if any (~/.ssh/id_*.pub), for `ssh -p 2222 root@localhost`.
home=$(getent passwd "${SUDO_USER:-root}" | cut -d: -f6)
install -d -m 700 "$new/root/.ssh"
cat "$home"/.ssh/id_*.pub > "$new/root/.ssh/authorized_keys" 2>/dev/null || true
chmod 600 "$new/root/.ssh/authorized_keys"
if [ "$INIT" = sysvinit ]; then
    for s in $RC_REMOVE; do
        in_root update-rc.d -f "$s" remove
    done
fi
install -m 644 "$out/patch-$PATCH_VERSION.tar.xz" "$new/usr/src/patch-$PATCH_VERSION.tar.xz"
rm -f "$new"/var/cache/apt/archives/*.deb "$new"/var/cache/apt/*.bin

# --- The check: GNU patch configures and builds in the root (i386 binaries run natively). The
# systemd root has the same packages for it, and is not checked again.
if [ "$INIT" = sysvinit ]; then
    in_root tar -xf "/usr/src/patch-$PATCH_VERSION.tar.xz" -C /tmp
    for step in ./configure "make -j1"; do
        t=$(now)
        in_root sh -c "cd /tmp/patch-$PATCH_VERSION && $step" > "$work/patch-build.log" 2>&1 ||
            { tail -30 "$work/patch-build.log" >&2; die "patch $PATCH_VERSION: '$step' failed in the root"; }
        echo "rootfs: patch $PATCH_VERSION: $step in the chroot took $(since "$t") s"
    done
    rm -rf "$new/tmp/patch-$PATCH_VERSION"
fi

# --- The image: ext4 of the tree (mke2fs -d: no mount, no loop device).
clean "$tree"
mv "$new" "$tree"
truncate -s "$IMAGE_SIZE" "$image.tmp"
mke2fs -q -t ext4 -L ring3-root -d "$tree" -F "$image.tmp"
e2fsck -fn "$image.tmp" > "$work/e2fsck.log" 2>&1 || { cat "$work/e2fsck.log" >&2; die "e2fsck failed"; }
if [ -n "${SUDO_UID:-}" ]; then
    chown "$SUDO_UID:$SUDO_GID" "$image.tmp" "$out/patch-$PATCH_VERSION.tar.xz"
fi
mv "$image.tmp" "$image"
clean "$work"
echo "rootfs: $2: $(du -h --apparent-size "$image" | cut -f1), $(du -h "$image" | cut -f1) on disk;" \
     "built in $(since "$start") s"
