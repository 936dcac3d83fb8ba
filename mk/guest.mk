# The guest Linux kernel, i386, from Debian's linux-source-6.12.
#
#   make guest-kernel        build/guest/vmlinux: every object assembled by ring3-as
#                            (gcc -B build/asbin/), then `ring3 audit`; fails unless clean;
#                            with DWARF debug information and Linux's gdb scripts (`make gdb`)
#   make guest-kernel-plain  build/guest/vmlinux-plain: same config without debug information,
#                            stock `as` (for timing and for comparing the rewritten kernel with
#                            the original)
#   make guest-kernel-insert build/guest/bzImage-insert: same config, ring3-as in insert mode
#                            (the paper's PE-Insert: sensitive instructions trap, and the
#                            monitor decodes each), audited with `ring3 audit --insert`
#   make guest-kernel-nopae  build/guest/bzImage-nopae: rewritten like the first, with 32-bit
#                            (2-level) paging and HIGHMEM4G instead of PAE (guest/linux/nopae.config)
#
# The source is unpacked once into build/linux-6.12; each variant builds out of tree in its
# own directory. Unpacking and configuring are stamped; Kbuild runs every time and is
# incremental, so a make with nothing changed costs seconds.

GUEST_TARBALL := /usr/src/linux-source-6.12.tar.xz
GUEST_SRC     := $(B)/linux-6.12
GUEST_DIR     := $(B)/guest
GUEST_FRAG    := guest/linux/ring3.config
GUEST_ALLOW   := guest/linux/audit-allow.txt
# Applied in order after unpacking: the guest-constants patch (constants only; see each hunk).
GUEST_PATCHES := $(sort $(wildcard guest/linux/patches/*.patch))

# The compiler of each variant: gcc -B makes gcc run build/asbin/as, which is ring3-as.
GUEST_CC_rewritten := gcc -B$(abspath $(B)/asbin)/
GUEST_CC_plain := gcc
GUEST_CC_insert := gcc -B$(abspath $(B)/asbin)/ -Wa,--ring3-mode=insert
GUEST_CC_nopae := $(GUEST_CC_rewritten)
# The fragments of each variant, merged in order over tinyconfig; check-config.sh checks the
# last (ring3.config alone is checked in the plain and insert variants).
GUEST_FRAGS_nopae := $(GUEST_FRAG) guest/linux/nopae.config
# The default kernel has debug information and Linux's gdb scripts (guest/linux/debug.config,
# `make gdb`); the others, which nobody debugs, are built without it, which saves minutes each.
GUEST_FRAGS_rewritten := $(GUEST_FRAG) guest/linux/debug.config
guest_frags = $(or $(GUEST_FRAGS_$(1)),$(GUEST_FRAG))
# Kbuild's targets beyond vmlinux and bzImage: the gdb scripts' vmlinux-gdb.py and constants.
GUEST_KTARGETS_rewritten := scripts_gdb

# Kbuild for variant $(1), in obj dir $(GUEST_DIR)/$(1). -j only when the parent make has no
# jobserver to share.
guest_kmake = $(MAKE) -C $(GUEST_SRC) O=$(abspath $(GUEST_DIR)/$(1)) ARCH=i386 \
    CC="$(GUEST_CC_$(1))" $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

.PHONY: guest-kernel guest-kernel-plain guest-kernel-insert guest-kernel-nopae guest-force
guest-force:
# Kbuild runs on every make, since only it knows what changed inside the tree; `make run`
# clears this when a kernel is already built, so that a second run starts in seconds (the
# stamps above still rebuild it after a change to the patch, config or rewriter).
GUEST_FORCE ?= guest-force

$(GUEST_SRC)/.ring3-unpacked: $(GUEST_TARBALL) $(GUEST_PATCHES)
	rm -rf $(GUEST_SRC) $(GUEST_SRC).tmp $(GUEST_DIR)/rewritten $(GUEST_DIR)/plain $(GUEST_DIR)/insert
	mkdir -p $(GUEST_SRC).tmp
	tar -xJf $< -C $(GUEST_SRC).tmp --strip-components=1
	for p in $(GUEST_PATCHES); do patch -s -d $(GUEST_SRC).tmp -p1 --no-backup-if-mismatch < $$p || exit 1; done
	@echo "guest-constants patch: $$(cat /dev/null $(GUEST_PATCHES) | grep -c '^[-+][^-+]') changed lines in $(words $(GUEST_PATCHES)) file(s)"
	mv $(GUEST_SRC).tmp $(GUEST_SRC)
	touch $@

# guest_variant(name, extra config prerequisites): configure and build one obj dir.
# Configuration is tinyconfig + our fragment + olddefconfig, then a check that Kconfig kept
# every line of the fragment (it silently drops a setting whose dependencies are unmet). The
# stamp is touched only when all of that succeeded.
define guest_variant
$(GUEST_DIR)/$(1)/.ring3-config: $(GUEST_SRC)/.ring3-unpacked $(call guest_frags,$(1)) guest/linux/check-config.sh $(2)
	@mkdir -p $$(@D)
	+$$(call guest_kmake,$(1)) tinyconfig >/dev/null
	$(GUEST_SRC)/scripts/kconfig/merge_config.sh -m -O $$(@D) $$(@D)/.config $(call guest_frags,$(1)) >/dev/null
	+$$(call guest_kmake,$(1)) olddefconfig >/dev/null
	guest/linux/check-config.sh $(lastword $(call guest_frags,$(1))) $$(@D)/.config
	touch $$@

# vmlinux and bzImage (what `qemu -kernel` takes; its decompressor goes through the same CC).
$(GUEST_DIR)/$(1)/vmlinux: $(GUEST_DIR)/$(1)/.ring3-config $(GUEST_FORCE)
	+$$(call guest_kmake,$(1)) vmlinux bzImage $(GUEST_KTARGETS_$(1))
# Made by the same Kbuild run; the empty recipe makes make look at its time again afterwards.
$(GUEST_DIR)/$(1)/arch/x86/boot/bzImage: $(GUEST_DIR)/$(1)/vmlinux ;
endef

# A build assembled by ring3-as (rewritten, insert). Kbuild does not know that the assembler
# changed, so a new ring3-as cleans the objects (every one of them went through the old rewriter).
define guest_ring3as_variant
$(call guest_variant,$(1),$(BIN)/ring3-as)
$(GUEST_DIR)/$(1)/vmlinux: $(GUEST_DIR)/$(1)/.ring3-as.stamp
$(GUEST_DIR)/$(1)/.ring3-as.stamp: $(BIN)/ring3-as | $(GUEST_DIR)/$(1)/.ring3-config
	+$$(call guest_kmake,$(1)) clean
	touch $$@
endef

$(eval $(call guest_ring3as_variant,rewritten))
$(eval $(call guest_ring3as_variant,insert))
$(eval $(call guest_ring3as_variant,nopae))
$(eval $(call guest_variant,plain,))

$(GUEST_DIR)/vmlinux: $(GUEST_DIR)/rewritten/vmlinux
	ln -f $< $@
$(GUEST_DIR)/vmlinux-plain: $(GUEST_DIR)/plain/vmlinux
	ln -f $< $@
$(GUEST_DIR)/bzImage: $(GUEST_DIR)/rewritten/arch/x86/boot/bzImage
	ln -f $< $@
$(GUEST_DIR)/bzImage-plain: $(GUEST_DIR)/plain/arch/x86/boot/bzImage
	ln -f $< $@
$(GUEST_DIR)/vmlinux-insert: $(GUEST_DIR)/insert/vmlinux
	ln -f $< $@
$(GUEST_DIR)/bzImage-insert: $(GUEST_DIR)/insert/arch/x86/boot/bzImage
	ln -f $< $@
$(GUEST_DIR)/bzImage-nopae: $(GUEST_DIR)/nopae/arch/x86/boot/bzImage
	ln -f $< $@

# The audit lists every sensitive instruction left unrewritten; the build fails unless none is.
# The vDSO is audited too: vmlinux holds it only as data, and guest processes run it (every
# way __kernel_vsyscall's alternatives can choose must be rewritten).
# guest_audit(output, vmlinux, variant, audit options): the insert build is audited with
# --insert, which accepts a sensitive unprivileged instruction only behind its marker.
define guest_audit
$(1): $(2) $(BIN)/ring3 $(GUEST_ALLOW)
	$(BIN)/ring3 audit $(4) --allow $(GUEST_ALLOW) $$< > $$@.tmp 2>&1 || { cat $$@.tmp; rm -f $$@.tmp; exit 1; }
	grep -qw '0 unrewritten sensitive instructions' $$@.tmp || { cat $$@.tmp; rm -f $$@.tmp; exit 1; }
	$(BIN)/ring3 audit $(4) $(GUEST_DIR)/$(3)/arch/x86/entry/vdso/vdso32.so.dbg > $$@.vdso 2>&1 || \
	    { cat $$@.vdso; rm -f $$@.tmp $$@.vdso; exit 1; }
	sed 's/^/vdso32: /' $$@.vdso >> $$@.tmp && rm -f $$@.vdso
	mv $$@.tmp $$@
endef
$(eval $(call guest_audit,$(GUEST_DIR)/audit.txt,$(GUEST_DIR)/vmlinux,rewritten,))
$(eval $(call guest_audit,$(GUEST_DIR)/audit-insert.txt,$(GUEST_DIR)/vmlinux-insert,insert,--insert))
$(eval $(call guest_audit,$(GUEST_DIR)/audit-nopae.txt,$(GUEST_DIR)/nopae/vmlinux,nopae,))

guest-kernel: $(BIN)/ring3-as $(BIN)/ring3 $(GUEST_DIR)/audit.txt $(GUEST_DIR)/bzImage
	@grep -w 'unrewritten sensitive instructions' $(GUEST_DIR)/audit.txt

guest-kernel-plain: $(GUEST_DIR)/vmlinux-plain $(GUEST_DIR)/bzImage-plain

guest-kernel-insert: $(BIN)/ring3-as $(BIN)/ring3 $(GUEST_DIR)/audit-insert.txt $(GUEST_DIR)/bzImage-insert
	@grep -w 'unrewritten sensitive instructions' $(GUEST_DIR)/audit-insert.txt

guest-kernel-nopae: $(BIN)/ring3-as $(BIN)/ring3 $(GUEST_DIR)/audit-nopae.txt $(GUEST_DIR)/bzImage-nopae
	@grep -w 'unrewritten sensitive instructions' $(GUEST_DIR)/audit-nopae.txt

# tests/test_guest_kernel.py and tests/test_linux.py need the rewritten kernel; the
# differential tests in tests/test_linux.py need the plain one (QEMU) and the insert one.
TEST_DEPS += guest-kernel guest-kernel-plain guest-kernel-insert
