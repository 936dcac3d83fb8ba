# The kernel's own x86 selftests as a conformance suite (tests/test_selftests.py): the 32-bit
# programs of tools/testing/selftests/x86 in the same linux-source-6.12 tree the guest is built
# from, compiled by that directory's own Makefile, unchanged, with -static so that they run in
# the busybox initramfs; tools/testing/selftests/breakpoints/breakpoint_test.c (the debug
# registers through ptrace), whose Makefile builds for the host's word size only, compiled
# here with -m32; and that initramfs with them appended as a second archive.
#
#   make selftests   build/selftests/{x86,breakpoints}/<name>_32 and
#                    build/guest/initramfs-selftests.cpio.gz

SELFTESTS_DIR       := $(B)/selftests/x86
BREAKPOINT_TEST     := $(B)/selftests/breakpoints/breakpoint_test_32
SELFTESTS_STAMP     := $(SELFTESTS_DIR)/.built
SELFTESTS_INITRAMFS := $(B)/guest/initramfs-selftests.cpio.gz

.PHONY: selftests
selftests: $(SELFTESTS_INITRAMFS)

# The selftests' Makefile builds every 32-bit target (all_32) into OUTPUT.
$(SELFTESTS_STAMP): $(GUEST_SRC)/.ring3-unpacked mk/selftests.mk
	@mkdir -p $(@D)
	+$(MAKE) -s -C $(GUEST_SRC)/tools/testing/selftests/x86 OUTPUT=$(abspath $(SELFTESTS_DIR)) \
	    CC="$(CC) -static" all_32
	touch $@

$(BREAKPOINT_TEST): $(GUEST_SRC)/.ring3-unpacked mk/selftests.mk
	@mkdir -p $(@D)
	$(CC) -m32 -static -O2 -I$(GUEST_SRC)/tools/testing/selftests -o $@ \
	    $(GUEST_SRC)/tools/testing/selftests/breakpoints/breakpoint_test.c

# The default initramfs, then /usr/selftests as an archive of its own (the kernel unpacks
# each archive of a concatenation in turn).
$(SELFTESTS_INITRAMFS): $(SELFTESTS_STAMP) $(BREAKPOINT_TEST) $(INITRAMFS) $(GEN_INIT_CPIO)
	{ echo "dir /usr/selftests 755 0 0"; \
	  for p in $(SELFTESTS_DIR)/*_32 $(BREAKPOINT_TEST); do echo "file /usr/selftests/$${p##*/} $$p 755 0 0"; done; \
	} > $@.spec
	{ cat $(INITRAMFS); $(GEN_INIT_CPIO) $@.spec | gzip -6n; } > $@.tmp && mv $@.tmp $@

TEST_DEPS += $(SELFTESTS_INITRAMFS)
