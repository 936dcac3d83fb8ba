# Test programs built from the monitor's sources: the semantics harness for rewritten sites.

HARNESS_SRCS := tests/semantics/harness.c monitor/runtime.S monitor/runtime.c monitor/operand.c

$(B)/tests/semantics/harness: $(HARNESS_SRCS) include/ring3/abi.h monitor/shared.h monitor/runtime.h monitor/operand.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(HARNESS_SRCS)

TEST_DEPS += $(B)/tests/semantics/harness $(BIN)/ring3-as
