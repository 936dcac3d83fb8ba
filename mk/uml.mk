# User Mode Linux, the baseline row of `make bench` (bench/envs/uml.py), from the same
# linux-source-6.12 as the guest, with no patch of ours.
#
#   make uml          = make uml-i386: the UML the benchmark runs
#   make uml-i386     build/uml/i386/linux: ARCH=um SUBARCH=i386, defconfig + bench/uml/uml.config,
#                     a 32-bit host program; it runs the very i386 benchmark programs that the
#                     other rows run (build/uml/i386/initramfs.cpio.gz)
#   make uml-x86_64   build/uml/x86_64/linux and its initramfs of the x86-64 builds of the
#                     programs (an x86-64 UML runs no i386 binaries): the UML a new user builds
#
# UML builds out of tree from a tree of its own: the same linux-source-6.12 tarball as the
# guest's (mk/guest.mk), unpacked without the guest patches, some of which change generic code
# that UML compiles too (mm/memory.c's fault-around, guest/linux/patches/0003).

UML_FRAG := bench/uml/uml.config
UML_PROGRAMS := loop getpid pipesw fork openclose forkexec mmap
UML_SRC := $(B)/linux-6.12-uml

.PHONY: uml uml-force
uml: uml-i386
uml-force:

# uml_kmake(subarch): Kbuild for one UML; -j only when the parent make has no jobserver to share.
uml_kmake = $(MAKE) -C $(UML_SRC) O=$(abspath $(B)/uml/$(1)/obj) ARCH=um SUBARCH=$(1) \
    $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

# A new unpack starts both builds over: an out-of-tree build keeps absolute source paths.
$(UML_SRC)/.ring3-unpacked: $(GUEST_TARBALL)
	rm -rf $(UML_SRC) $(UML_SRC).tmp $(B)/uml/i386/obj $(B)/uml/x86_64/obj
	mkdir -p $(UML_SRC).tmp
	tar -xJf $< -C $(UML_SRC).tmp --strip-components=1
	mv $(UML_SRC).tmp $(UML_SRC)
	touch $@

# uml_subarch(subarch, compiler flag of its user programs)
define uml_subarch
.PHONY: uml-$(1)
uml-$(1): $(B)/uml/$(1)/linux $(B)/uml/$(1)/initramfs.cpio.gz

$(B)/uml/$(1)/obj/.ring3-config: $(UML_SRC)/.ring3-unpacked $(UML_FRAG) guest/linux/check-config.sh
	@mkdir -p $$(@D)
	+$$(call uml_kmake,$(1)) defconfig >/dev/null
	$(UML_SRC)/scripts/kconfig/merge_config.sh -m -O $$(@D) $$(@D)/.config $(UML_FRAG) >/dev/null
	+$$(call uml_kmake,$(1)) olddefconfig >/dev/null
	guest/linux/check-config.sh $(UML_FRAG) $$(@D)/.config
	touch $$@

# Kbuild runs on every make (only it knows what changed) and is incremental.
$(B)/uml/$(1)/obj/linux: $(B)/uml/$(1)/obj/.ring3-config uml-force
	+$$(call uml_kmake,$(1)) linux

$(B)/uml/$(1)/linux: $(B)/uml/$(1)/obj/linux
	ln -f $$< $$@

$(B)/uml/$(1)/init: bench/uml/init.c mk/uml.mk
	@mkdir -p $$(@D)
	$(CC) $(2) -static -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o $$@ $$<

# The initramfs: our /init (also /bin/true), the console, the serial line the programs write
# to, and the benchmark programs of this width (mk/bench.mk builds them).
$(B)/uml/$(1)/initramfs.spec: mk/uml.mk
	@mkdir -p $$(@D)
	{ for d in /bin /dev /proc /root; do echo "dir $$$$d 755 0 0"; done; \
	  echo "dir /tmp 1777 0 0"; \
	  echo "nod /dev/console 600 0 0 c 5 1"; \
	  echo "nod /dev/ttyS0 600 0 0 c 4 64"; \
	  echo "nod /dev/null 666 0 0 c 1 3"; \
	  echo "file /init $(B)/uml/$(1)/init 755 0 0"; \
	  echo "file /bin/true $(B)/uml/$(1)/init 755 0 0"; \
	  for p in $(UML_PROGRAMS); do echo "file /bin/$$$$p $(B)/bench/programs/$(1)/$$$$p 755 0 0"; done; \
	} > $$@.tmp && mv $$@.tmp $$@

$(B)/uml/$(1)/initramfs.cpio.gz: $(B)/uml/$(1)/initramfs.spec $(GEN_INIT_CPIO) $(B)/uml/$(1)/init \
        $(patsubst %,$(B)/bench/programs/$(1)/%,$(UML_PROGRAMS))
	$(GEN_INIT_CPIO) $$< | gzip -9n > $$@.tmp && mv $$@.tmp $$@
endef

$(eval $(call uml_subarch,i386,-m32))
$(eval $(call uml_subarch,x86_64,))
