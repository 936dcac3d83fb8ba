# The guest's initramfs: Debian's busybox-static:i386, our /init and our test programs.
#
#   make initramfs    build/guest/initramfs.cpio.gz (newc, gzip)
#
# The archive is listed in a gen_init_cpio spec (the kernel's own tool, built from the
# unpacked source), so that /dev/console exists without root. Rebuilt only when an input
# changes.

INITRAMFS     := $(B)/guest/initramfs.cpio.gz
INITRAMFS_DIR := $(B)/guest/initramfs
GEN_INIT_CPIO := $(B)/guest/gen_init_cpio
GUEST_PROGRAMS := touchmem segv simd getpid forkexec
GUEST_PROG_BINS := $(patsubst %,$(B)/guest/programs/%,$(GUEST_PROGRAMS))
# Static i386 programs of ours; they run unrewritten in the guest, as any Debian binary does.
GUEST_PROG_CFLAGS := -m32 -static -std=gnu11 -O2 -Wall -Wextra -Werror

.PHONY: initramfs
initramfs: $(INITRAMFS)

$(GEN_INIT_CPIO): $(GUEST_SRC)/.ring3-unpacked
	@mkdir -p $(@D)
	$(CC) -O2 -o $@ $(GUEST_SRC)/usr/gen_init_cpio.c

$(B)/guest/programs/%: guest/programs/%.c
	@mkdir -p $(@D)
	$(CC) $(GUEST_PROG_CFLAGS) -o $@ $<

# The busybox of the busybox-static:i386 package (tools/install-deps.sh installs it).
$(INITRAMFS_DIR)/spec: guest/initramfs/init mk/initramfs.mk $(GUEST_PROG_BINS)
	@mkdir -p $(@D)
	busybox=$$(dpkg -L busybox-static:i386 | grep '/bin/busybox$$') && \
	{ for d in /bin /sbin /usr /usr/bin /usr/sbin /dev /proc /sys /tmp /root /etc; do \
	      echo "dir $$d 755 0 0"; done; \
	  echo "nod /dev/console 600 0 0 c 5 1"; \
	  echo "file /init $(abspath guest/initramfs/init) 755 0 0"; \
	  echo "file /bin/busybox $$busybox 755 0 0"; \
	  $$busybox --list-full | grep -vx bin/busybox | sed 's|.*|slink /& /bin/busybox 777 0 0|'; \
	  for p in $(GUEST_PROG_BINS); do echo "file /usr/bin/$${p##*/} $(abspath .)/$$p 755 0 0"; done; \
	} > $@.tmp && mv $@.tmp $@

$(INITRAMFS): $(INITRAMFS_DIR)/spec $(GEN_INIT_CPIO)
	$(GEN_INIT_CPIO) $< | gzip -9n > $@.tmp && mv $@.tmp $@

TEST_DEPS += $(INITRAMFS)
