# Benchmarks.
#
#   make bench        the paper's Table 1 in the guest, every environment of bench/envs/
#                     (bench/table.py: bench/RESULTS.md, results.json, results.png), then its
#                     Table 2, GNU patch built in the Debian root, and a disk read (bench/table2.py:
#                     its section of RESULTS.md, results-table2.json), then the per-event costs
#                     of the monitor against QEMU (bench/run.py), then the network table: iperf3
#                     and ping through user-mode networking and between two guests on a stream
#                     (bench/table_net.py: its section of RESULTS.md, results-net.json), then the
#                     SHIMOS table: the IKC channel, two guests on its switch, a served disk and
#                     a build on a served root, each beside what it replaces (bench/table_shimos.py)
#   make bench-quick  each benchmark program once on each ring3 mode (default, --isolation=none,
#                     --syscalls=sysemu): a smoke test of the harness and of the modes
#
# The programs (bench/programs/<name>.c) are built for i386 (the guest's initramfs puts them in
# /usr/bench; they also run natively) and for x86-64 (for a User Mode Linux that cannot run
# i386 binaries). The event guests use the test guests' runtime (testguests/lib, built by
# mk/testguests.mk).

BENCH_PROGRAMS := loop getpid pipesw fork openclose forkexec mmap
BENCH_PROG_BINS := $(foreach a,i386 x86_64,$(patsubst %,$(B)/bench/programs/$(a)/%,$(BENCH_PROGRAMS)))
BENCH_PROG_CFLAGS := -static -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror

.PHONY: bench-programs bench-quick
bench-programs: $(BENCH_PROG_BINS)

$(B)/bench/programs/i386/%: bench/programs/%.c bench/programs/bench.h mk/bench.mk
	@mkdir -p $(@D)
	$(CC) -m32 $(BENCH_PROG_CFLAGS) -o $@ $<
$(B)/bench/programs/x86_64/%: bench/programs/%.c bench/programs/bench.h mk/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_PROG_CFLAGS) -o $@ $<

BENCH_LIB := $(sort $(wildcard testguests/lib/*.c testguests/lib/*.S))

# $(1): variant (plain: stock as, for QEMU; ring3: ring3-as); $(2): compiler
define BENCH_VARIANT
$(B)/bench/$(1)/events.o: bench/events.c $(if $(filter ring3,$(1)),$(BIN)/ring3-as)
	@mkdir -p $$(@D)
	$(2) $$(TG_CFLAGS) -c -o $$@ $$<

$(B)/bench/$(1)/events.elf: $(B)/bench/$(1)/events.o $(patsubst testguests/%,$(B)/testguests/$(1)/obj/%.o,$(BENCH_LIB))
	$(LD) $$(TG_LDFLAGS) -o $$@ $$^
endef
$(eval $(call BENCH_VARIANT,plain,$(CC)))
$(eval $(call BENCH_VARIANT,ring3,$(CC) -B $(B)/asbin/))

# The IKC channel alone, between two processes (bench/ikc_channel.c, with ikc/ as the monitor has it).
IKC_OBJS := $(patsubst %,$(OBJ)/%.o,$(sort $(wildcard ikc/*.c)) lib/fail.c hw/clock.c)
$(B)/bench/ikc-channel: bench/ikc_channel.c $(IKC_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(IKC_OBJS)

.PHONY: bench
bench: $(B)/bench/ikc-channel all guest-kernel guest-kernel-plain guest-kernel-insert initramfs bench-programs $(B)/bench/plain/events.elf $(B)/bench/ring3/events.elf $(B)/rootfs.img
	$(PYTHON) bench/table.py
	$(PYTHON) bench/table2.py
	$(PYTHON) bench/run.py
	$(PYTHON) bench/table_net.py
	$(PYTHON) bench/table_shimos.py

bench-quick: all guest-kernel initramfs bench-programs
	$(PYTHON) bench/table.py --quick

# tests/test_bench.py runs bench-quick's check, and the channel's benchmark briefly.
TEST_DEPS += bench-programs $(B)/bench/ikc-channel
