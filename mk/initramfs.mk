# The guest's initramfs: Debian's busybox-static:i386, our /init, our test programs and the
# benchmark programs (mk/bench.mk) in /usr/bench.
#
#   make initramfs        build/guest/initramfs.cpio.gz (newc, gzip)
#   make guest-programs   build/guest/programs/<name>: static i386, for the guest and the host
#
# The archive is listed in a gen_init_cpio spec (the kernel's own tool, built from the
# unpacked source), so that /dev/console exists without root. Every file is rebuilt only when
# one of its inputs changes.

INITRAMFS       := $(B)/guest/initramfs.cpio.gz
INITRAMFS_DIR   := $(B)/guest/initramfs
GEN_INIT_CPIO   := $(B)/guest/gen_init_cpio
GUEST_BUSYBOX   := $(INITRAMFS_DIR)/busybox
GUEST_INIT      := guest/initramfs/init
GUEST_DHCP      := guest/initramfs/udhcpc.script
GUEST_PROGRAMS  := touchmem folios segv simd getpid forkexec sigdfl hostile sigstress debugregs lockwindow ldt nx remap manymaps cpuid vsyscall-edge
GUEST_PROG_BINS := $(patsubst %,$(B)/guest/programs/%,$(GUEST_PROGRAMS))
GUEST_BENCH_BINS := $(patsubst %,$(B)/bench/programs/i386/%,$(BENCH_PROGRAMS))
# Static i386 programs of ours; they run unrewritten in the guest, as any Debian binary does,
# and natively on the x86-64 host.
GUEST_PROG_CFLAGS := -m32 -static -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror

.PHONY: initramfs guest-programs
initramfs: $(INITRAMFS)
guest-programs: $(GUEST_PROG_BINS)

$(GEN_INIT_CPIO): $(GUEST_SRC)/.ring3-unpacked
	@mkdir -p $(@D)
	$(CC) -O2 -o $@ $(GUEST_SRC)/usr/gen_init_cpio.c

$(B)/guest/programs/%: guest/programs/%.c mk/initramfs.mk
	@mkdir -p $(@D)
	$(CC) $(GUEST_PROG_CFLAGS) -I. -o $@ $<

# hostile forges an event in the stub's control area, as ring3 lays it out.
$(B)/guest/programs/hostile: stub/asm.h stub/protocol.h

# busybox: the file of the installed busybox-static:i386 (DEPS in the Makefile installs it);
# when that package is not installed, the same package fetched by apt-get download and
# unpacked under build/ (no root needed, nothing on the host replaced).
BUSYBOX_I386 := $(wildcard $(shell dpkg-query -L busybox-static:i386 2>/dev/null | grep -m1 '/bin/busybox$$'))
ifneq ($(BUSYBOX_I386),)
$(GUEST_BUSYBOX): $(BUSYBOX_I386)
	@mkdir -p $(@D)
	cp $< $@.tmp && mv $@.tmp $@
else
$(GUEST_BUSYBOX):
	rm -rf $(@D)/deb && mkdir -p $(@D)/deb
	cd $(@D)/deb && apt-get download busybox-static:i386
	dpkg-deb -x $(@D)/deb/busybox-static_*_i386.deb $(@D)/deb/root
	cp $(@D)/deb/root/bin/busybox $@.tmp && mv $@.tmp $@
endif

# The file list: directories, the console node, /init and udhcpc's hook, busybox and a symbolic link for each
# of its applets where `busybox --list-full` puts it, our programs in /usr/bin, the benchmark
# programs in /usr/bench.
$(INITRAMFS_DIR)/spec: $(GUEST_BUSYBOX) mk/initramfs.mk mk/bench.mk
	@mkdir -p $(@D)
	set -o pipefail; \
	{ for d in /bin /sbin /usr /usr/bin /usr/sbin /usr/bench /dev /proc /sys /root /etc; do \
	      echo "dir $$d 755 0 0"; done; \
	  echo "dir /tmp 1777 0 0"; \
	  echo "nod /dev/console 600 0 0 c 5 1"; \
	  echo "file /init $(GUEST_INIT) 755 0 0"; \
	  echo "file /etc/udhcpc.script $(GUEST_DHCP) 755 0 0"; \
	  echo "file /bin/busybox $(GUEST_BUSYBOX) 755 0 0"; \
	  $(GUEST_BUSYBOX) --list-full | grep -vx bin/busybox | sed 's|.*|slink /& /bin/busybox 777 0 0|'; \
	  for p in $(GUEST_PROG_BINS); do echo "file /usr/bin/$${p##*/} $$p 755 0 0"; done; \
	  for p in $(GUEST_BENCH_BINS); do echo "file /usr/bench/$${p##*/} $$p 755 0 0"; done; \
	} > $@.tmp && mv $@.tmp $@

$(INITRAMFS): $(INITRAMFS_DIR)/spec $(GEN_INIT_CPIO) $(GUEST_INIT) $(GUEST_DHCP) $(GUEST_BUSYBOX) $(GUEST_PROG_BINS) $(GUEST_BENCH_BINS)
	$(GEN_INIT_CPIO) $< | gzip -9n > $@.tmp && mv $@.tmp $@

TEST_DEPS += $(INITRAMFS)
