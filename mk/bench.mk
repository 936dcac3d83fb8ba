# `make bench`: ring3 side by side with its baselines, medians and ratios (bench/run.py).
# The benchmark guests use the test guests' runtime (testguests/lib, built by mk/testguests.mk).

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

.PHONY: bench
bench: all $(B)/bench/plain/events.elf $(B)/bench/ring3/events.elf
	$(PYTHON) bench/run.py
