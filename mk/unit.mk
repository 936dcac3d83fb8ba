# Unit tests of the device models: build/tests/unit/test_<device>, each linked against the
# devices (hw/, virtio/), the disk images (block/), the network backends (net/) and the PC that
# wires them (machine/) only;
# and of a few monitor modules that stand alone (UNIT_EXTRA_<test>).
# The hw objects come from the build/obj/%.c.o rule in mk/monitor.mk (same CFLAGS as build/bin/ring3);
# under SANITIZE=1 from build/obj-asan, with AddressSanitizer as well.

UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRCS))
UNIT_OBJ    := $(if $(SANITIZE),$(B)/obj-asan,$(OBJ))
UNIT_CFLAGS := $(if $(SANITIZE),$(ASAN_CFLAGS),$(CFLAGS))
HW_OBJS   := $(patsubst %,$(UNIT_OBJ)/%.o,$(sort $(wildcard hw/*.c virtio/*.c block/*.c net/*.c ikc/*.c machine/*.c lib/fail.c lib/optlist.c)))

$(B)/tests/unit/%: tests/unit/%.c $(HW_OBJS) $(SAN_STAMP)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -MMD -MP -o $@ $< $(HW_OBJS) $(UNIT_EXTRA_$*) -lslirp

# A unit test of a monitor module links that module too.
UNIT_EXTRA_test_host_probe := $(UNIT_OBJ)/monitor/host/host_probe.c.o
$(B)/tests/unit/test_host_probe: $(UNIT_EXTRA_test_host_probe)
UNIT_EXTRA_test_xstate := $(UNIT_OBJ)/x86/xstate.c.o
$(B)/tests/unit/test_xstate: $(UNIT_EXTRA_test_xstate)

.PHONY: unit
unit: $(UNIT_BINS)

TEST_DEPS += $(UNIT_BINS)

-include $(UNIT_BINS:=.d)
