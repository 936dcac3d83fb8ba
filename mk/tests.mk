# Test programs built from the monitor's sources: the semantics harness for rewritten sites, and
# insert mode's decoder on its own (tests/test_rewriter.py feeds it what ring3-as assembles).

HARNESS_SRCS := tests/semantics/harness.c monitor/runtime.S monitor/runtime.c monitor/operand.c

$(B)/tests/semantics/harness: $(HARNESS_SRCS) include/ring3/abi.h monitor/shared.h monitor/runtime.h monitor/operand.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(HARNESS_SRCS)

TEST_DEPS += $(B)/tests/semantics/harness $(BIN)/ring3-as

INSERT_DECODE_SRCS := tests/insert/decode.c monitor/insert_decode.c monitor/sensitive.c

$(B)/tests/insert/decode: $(INSERT_DECODE_SRCS) include/ring3/abi.h monitor/insert.h monitor/sensitive.h monitor/operand.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(INSERT_DECODE_SRCS) -lcapstone

TEST_DEPS += $(B)/tests/insert/decode
