#!/bin/bash
# Runs one command as root in a throwaway virtual machine whose kernel mounts cgroup v2 alone
# (/sys/fs/cgroup, every controller offered), so the agent's v2 path meets a real kernel on hosts
# that mount cgroup v1 (as ours do). The guest sees the host's file system read-only over 9p, with
# fresh /tmp, /dev/shm, /proc and /sys of its own; the command runs chrooted into it, in the
# caller's working directory.
#
#   tests/vm/run_in_vm.sh [--memory-mib N] [--timeout-s N] [--systemd] -- COMMAND [ARG...]
#
# With --systemd the guest boots the host's systemd as its init instead: the root is the host's
# file system under a writable overlay (a tmpfs upper layer, so the guest may install packages'
# files, users and units, and nothing reaches the host) with a /tmp of its own, /etc/fstab is
# emptied and the consoles' gettys and the host's hardware, upkeep and network-wait units masked,
# and the guest boots to a target of its own (basic.target, the network's targets
# and COMMAND as a oneshot unit, none of the host's services), with COMMAND's output on the
# serial console; the guest powers off when it ends. This is how units meet a real
# service manager (deploy/systemd/install_test.sh).
#
# Exits with the command's status; 77 when this host cannot start one (no qemu-system-x86_64, no
# Debian kernel under /boot, or no cpio): ctest counts that as skipped. Needs Debian's
# qemu-system-x86, linux-image-amd64 and busybox-static (deploy/setup.sh --test installs them).
# Emulated (TCG): on our machines nested KVM hangs at boot. EMBODY_VM_ACCEL=kvm asks for KVM.
# The guest's kernel runs without speculation mitigations (mitigations=off): under emulation the
# page-table isolation they bring flushes the emulated TLB at every system call, and the guest
# runs nothing but our own tests.
set -euo pipefail

memory_mib=2048
timeout_s=480
boot=command
while [[ $# -gt 0 ]]; do
  case "$1" in
    --memory-mib) memory_mib="$2"; shift 2 ;;
    --timeout-s) timeout_s="$2"; shift 2 ;;
    --systemd) boot=systemd; shift ;;
    --) shift; break ;;
    *) echo "run_in_vm.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "run_in_vm.sh: no command" >&2; exit 2; }

skip() { echo "run_in_vm.sh: skipped: $*" >&2; exit 77; }
qemu=$(command -v qemu-system-x86_64 || true)
[[ -n "$qemu" ]] || skip "no qemu-system-x86_64 (Debian package qemu-system-x86)"
busybox=/bin/busybox
# grep reads the whole list: with -q it could stop early, and busybox's SIGPIPE would fail the
# pipeline (pipefail) and skip the test at random.
[[ -x "$busybox" ]] && "$busybox" --list 2>/dev/null | grep -x insmod >/dev/null ||
  skip "no static busybox with insmod (Debian package busybox-static)"
command -v cpio >/dev/null || skip "no cpio"
kernel=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1 || true)
[[ -n "$kernel" ]] || skip "no kernel under /boot (Debian package linux-image-amd64)"
kver=${kernel#/boot/vmlinuz-}
moddir=/lib/modules/$kver
[[ -d "$moddir" ]] || skip "no modules for $kver"
if [[ $boot == systemd ]]; then
  [[ -x /lib/systemd/systemd ]] || skip "no systemd on this host"
fi

work=$(mktemp -d /tmp/embody-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/initramfs
mkdir -p "$root"/{bin,dev,proc,sys,newroot,modules}
cp "$busybox" "$root/bin/busybox"
# The modules the guest needs for virtio-pci and 9p, with their dependencies, in load order.
command -v modprobe >/dev/null || skip "no modprobe (Debian package kmod)"
mods=$(modprobe --show-depends -S "$kver" virtio_pci 2>/dev/null
       modprobe --show-depends -S "$kver" 9pnet_virtio 2>/dev/null
       modprobe --show-depends -S "$kver" 9p 2>/dev/null
       modprobe --show-depends -S "$kver" overlay 2>/dev/null) || true
for f in $(awk '$1 == "insmod" { print $2 }' <<< "$mods"); do
  m=$(basename "$f"); m=${m%%.ko*}
  grep -qx "$m" "$root/modules/order" 2>/dev/null && continue
  case "$f" in
    *.ko.xz) xz -dc "$f" > "$root/modules/$m.ko" ;;
    *.ko.zst) zstd -qdc "$f" > "$root/modules/$m.ko" ;;
    *.ko.gz) gzip -dc "$f" > "$root/modules/$m.ko" ;;
    *) cp "$f" "$root/modules/$m.ko" ;;
  esac
  echo "$m" >> "$root/modules/order"
done

# The command travels as a NUL-separated file so any argument survives.
printf '%s\0' "$@" > "$root/command"
printf '%s' "$PWD" > "$root/cwd"
# Both kinds of guest start alike: their own /proc, /sys and /dev, the modules, and mount_host,
# which mounts the host's file system read-only over 9p (status 70 when it cannot).
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
ifconfig lo 127.0.0.1 up
hostname embody-vm
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do insmod /modules/$m.ko || echo "insmod $m failed" >&2; done
# cache=mmap keeps the pages of mapped files (every executable and shared library) in the guest's
# page cache: without it each exec faults them in again over 9p, and mpirun, which maps a hundred
# plugins per start, took 10 s to print its version under emulation (2.5 s with). Nothing else is
# cached (unlike cache=loose, with which the chrooted guest did not find its own /proc mounts).
mount_host() {
  mkdir -p "$1"
  if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=mmap hostroot "$1"; then
    echo "EMBODY-VM-EXIT 70"; poweroff -f
  fi
}
INIT
if [[ $boot == systemd ]]; then
cat >> "$root/init" <<'INIT'
# Boots the host's systemd on an overlay of the host's root; the command runs as a unit.
mount_host /lower
mkdir -p /rw
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
if ! mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot; then
  echo "EMBODY-VM-EXIT 71"; poweroff -f
fi
n=/newroot
: > $n/etc/fstab
# The host's container marker would make systemd believe it runs in a container.
rm -f $n/.dockerenv
rm -f $n/etc/machine-id && : > $n/etc/machine-id
echo embody-vm > $n/etc/hostname
# Masked besides: what the host's boot does for hardware, persistent state and upkeep that a
# throwaway machine without a network card needs not (every unit started costs seconds under
# emulation). Devices come from devtmpfs, the journal stays in /run, loopback is systemd's own.
for u in serial-getty@ttyS0.service getty@tty1.service console-getty.service \
         systemd-firstboot.service systemd-timesyncd.service \
         systemd-udev-trigger.service systemd-udev-settle.service \
         systemd-networkd-wait-online.service NetworkManager-wait-online.service \
         ifupdown-wait-online.service systemd-journal-flush.service \
         systemd-random-seed.service systemd-pstore.service systemd-repart.service \
         systemd-pcrphase.service systemd-pcrphase-sysinit.service \
         systemd-machine-id-commit.service systemd-binfmt.service \
         proc-sys-fs-binfmt_misc.automount sys-kernel-debug.mount sys-kernel-tracing.mount \
         sys-kernel-config.mount sys-fs-fuse-connections.mount \
         ldconfig.service systemd-hwdb-update.service systemd-journal-catalog-update.service \
         systemd-update-done.service apt-daily.timer apt-daily-upgrade.timer \
         dpkg-db-backup.timer e2scrub_all.timer fstrim.timer man-db.timer logrotate.timer \
         systemd-tmpfiles-clean.timer; do
  ln -sf /dev/null $n/etc/systemd/system/$u
done
mkdir -p $n/etc/embody-vm
cp /command /cwd $n/etc/embody-vm/
cat > $n/etc/embody-vm/run.sh <<'RUN'
#!/bin/sh
# The command, in the caller's directory, with a clean environment; its status on the console.
# Its lines are marked, so the host can tell them from systemd's own on the same console.
cd "$(cat /etc/embody-vm/cwd)" || exit 1
rc_file=/run/embody-vm-rc
{ xargs -0 -a /etc/embody-vm/command env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root sh -c 'exec "$@"' sh 2>&1
  echo $? > $rc_file; } | sed -u 's/^/EMBODY-VM-OUT /'
echo "EMBODY-VM-EXIT $(cat $rc_file)"
systemctl --no-block poweroff
RUN
chmod 755 $n/etc/embody-vm/run.sh
# The guest boots to embody-vm.target (systemd's command line names it): basic.target, the
# network's targets and the command, none of the host's own services.
cat > $n/etc/systemd/system/embody-vm.target <<'UNIT'
[Unit]
Description=A throwaway machine of tests/vm/run_in_vm.sh --systemd
Requires=basic.target embody-vm-command.service
Wants=network-online.target
After=basic.target network-online.target
AllowIsolate=yes
UNIT
cat > $n/etc/systemd/system/embody-vm-command.service <<'UNIT'
[Unit]
Description=The command of tests/vm/run_in_vm.sh --systemd
After=basic.target network-online.target
[Service]
Type=oneshot
ExecStart=/etc/embody-vm/run.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=infinity
UNIT
# The guest's own /run, /proc, /sys and /dev: over 9p the lower layer's are the host's, which
# tell systemd it runs in a container (where it ignores the kernel's command line; the target
# and quiet status are on its own command line).
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs $n/run
mount -t proc proc $n/proc
mount -t sysfs sys $n/sys
mount -t devtmpfs dev $n/dev
# A /tmp of its own too: the boot empties /tmp (tmpfiles.d's `D /tmp`), which over the host's
# would whiteout every file of it, one 9p round trip each (minutes under emulation).
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $n/tmp
echo "EMBODY-VM-START"
exec switch_root /newroot /lib/systemd/systemd --unit=embody-vm.target --show-status=no
INIT
else
cat >> "$root/init" <<'INIT'
mount_host /newroot
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t cgroup2 -o nsdelegate cgroup2 /newroot/sys/fs/cgroup
mount -t devtmpfs dev /newroot/dev
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t tmpfs -o mode=1777 tmpfs /newroot/var/tmp
mkdir -p /newroot/dev/shm && mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mkdir -p /newroot/dev/pts && mount -t devpts devpts /newroot/dev/pts 2>/dev/null || true
mount -t tmpfs tmpfs /newroot/run
echo "EMBODY-VM-START"
cd /newroot && chroot /newroot /bin/sh -c 'cd "$(cat /proc/1/root/cwd)" && xargs -0 -a /proc/1/root/command env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root sh -c "exec \"\$@\"" sh'
echo "EMBODY-VM-EXIT $?"
poweroff -f
INIT
fi
chmod 755 "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) > "$work/initrd"

accel=(-accel tcg)
if [[ "${EMBODY_VM_ACCEL:-tcg}" == kvm ]]; then accel=(-accel kvm -cpu max); fi
cpus=$(nproc); (( cpus > 2 )) && cpus=2
set +e
timeout "$timeout_s" "$qemu" "${accel[@]}" -m "$memory_mib" -smp "$cpus" -nographic -no-reboot \
  -kernel "$kernel" -initrd "$work/initrd" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init mitigations=off" \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on" \
  -nic none -serial mon:stdio -display none </dev/null > "$work/console" 2>&1
qemu_rc=$?
set -e
# EMBODY_VM_CONSOLE=FILE keeps the whole console (systemd's messages too) for a post-mortem.
[[ -n "${EMBODY_VM_CONSOLE:-}" ]] && cp "$work/console" "$EMBODY_VM_CONSOLE"
if [[ $boot == systemd ]]; then
  tr -d '\r' < "$work/console" | sed -n 's/^EMBODY-VM-OUT //p' || true
else
  tr -d '\r' < "$work/console" | sed -n '/EMBODY-VM-START/,$p' | grep -v '^EMBODY-VM-START$' |
    grep -v 'EMBODY-VM-EXIT' || true
fi
rc=$(tr -d '\r' < "$work/console" | sed -n 's/.*EMBODY-VM-EXIT \([0-9]*\).*/\1/p' | tail -1)
if [[ -z "$rc" ]]; then
  echo "run_in_vm.sh: the machine ended without the command's status (qemu $qemu_rc); console:" >&2
  tail -40 "$work/console" >&2
  exit 1
fi
if [[ "$rc" == 71 ]]; then
  echo "run_in_vm.sh: the guest could not mount its overlay root; console:" >&2
  tail -30 "$work/console" >&2
  exit 1
fi
if [[ "$rc" == 70 ]]; then
  echo "run_in_vm.sh: the guest could not mount the host over 9p; console:" >&2
  tail -30 "$work/console" >&2
  exit 1
fi
exit "$rc"
