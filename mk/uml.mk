# User Mode Linux, the baseline row of `make bench` (bench/envs/uml.py), from the same
# linux-source-6.12 as the guest.
#
#   make uml     build/uml/linux: ARCH=um, x86-64, defconfig + bench/uml/uml.config;
#                build/uml/initramfs.cpio.gz: our /init and the x86-64 benchmark programs
#
# UML builds out of tree from the guest's unpacked source (mk/guest.mk). That tree carries the
# guest-constants patch to arch/x86/include/asm/segment.h; an x86-64 UML never compiles the
# patched lines (they sit under CONFIG_X86_32), and `make uml` checks that no object of UML
# depends on a file that a guest patch touches, so that the baseline stays Debian's source.

UML_DIR     := $(B)/uml
UML_OBJ     := $(UML_DIR)/obj
UML_FRAG    := bench/uml/uml.config
UML_KMAKE    = $(MAKE) -C $(GUEST_SRC) O=$(abspath $(UML_OBJ)) ARCH=um SUBARCH=x86_64 \
    $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

.PHONY: uml uml-force
uml: $(UML_DIR)/linux $(UML_DIR)/.clean-source $(UML_DIR)/initramfs.cpio.gz
uml-force:

$(UML_OBJ)/.ring3-config: $(GUEST_SRC)/.ring3-unpacked $(UML_FRAG) guest/linux/check-config.sh
	@mkdir -p $(@D)
	+$(UML_KMAKE) defconfig >/dev/null
	$(GUEST_SRC)/scripts/kconfig/merge_config.sh -m -O $(@D) $(@D)/.config $(UML_FRAG) >/dev/null
	+$(UML_KMAKE) olddefconfig >/dev/null
	guest/linux/check-config.sh $(UML_FRAG) $(@D)/.config
	touch $@

# Kbuild runs on every make (only it knows what changed) and is incremental.
$(UML_OBJ)/linux: $(UML_OBJ)/.ring3-config uml-force
	+$(UML_KMAKE) linux

$(UML_DIR)/linux: $(UML_OBJ)/linux
	ln -f $< $@

# The guest patches must not reach UML: fail when any UML object's dependency list (Kbuild's
# .*.cmd files) names a file that one of them changes.
$(UML_DIR)/.clean-source: $(UML_OBJ)/linux $(GUEST_PATCHES)
	@set -e; files=$$(sed -n 's|^+++ b/||p' /dev/null $(GUEST_PATCHES) | cut -f1); \
	for f in $$files; do \
	    if hits=$$(find $(UML_OBJ) -name '.*.cmd' -print0 | xargs -0 grep -l -F "$(abspath $(GUEST_SRC))/$$f" | head -3) \
	       && [ -n "$$hits" ]; then \
	        echo "uml: $$f, changed by a guest patch, is compiled into UML ($$hits); UML needs a clean copy of the source" >&2; \
	        exit 1; fi; \
	done
	touch $@

# The initramfs: our /init (also /bin/true), the console, the serial line the programs write
# to, and the benchmark programs built for x86-64 (mk/bench.mk), since an x86-64 UML runs no
# i386 binaries.
UML_PROGRAMS  := loop getpid pipesw fork openclose forkexec mmap
UML_PROG_DIR  ?= $(B)/bench/programs/x86_64
UML_PROG_BINS := $(patsubst %,$(UML_PROG_DIR)/%,$(UML_PROGRAMS))

$(UML_DIR)/init: bench/uml/init.c mk/uml.mk
	@mkdir -p $(@D)
	$(CC) -static -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o $@ $<

$(UML_DIR)/initramfs.spec: mk/uml.mk
	@mkdir -p $(@D)
	{ for d in /bin /dev /proc /tmp /root; do echo "dir $$d 755 0 0"; done; \
	  echo "nod /dev/console 600 0 0 c 5 1"; \
	  echo "nod /dev/ttyS0 600 0 0 c 4 64"; \
	  echo "nod /dev/null 666 0 0 c 1 3"; \
	  echo "file /init $(UML_DIR)/init 755 0 0"; \
	  echo "file /bin/true $(UML_DIR)/init 755 0 0"; \
	  for p in $(UML_PROG_BINS); do echo "file /bin/$${p##*/} $$p 755 0 0"; done; \
	} > $@.tmp && mv $@.tmp $@

$(UML_DIR)/initramfs.cpio.gz: $(UML_DIR)/initramfs.spec $(GEN_INIT_CPIO) $(UML_DIR)/init $(UML_PROG_BINS)
	$(GEN_INIT_CPIO) $< | gzip -9n > $@.tmp && mv $@.tmp $@
